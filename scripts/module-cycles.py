"""Module-level import graph of native-server/src/server: nodes are the server folder's direct
children (files/folders); an edge A->B when a file under A names B (super::B / crate::server::B /
super::super::B resolved). Reports edges on cycles (strongly connected components)."""
import os, re, sys, collections
root = sys.argv[1] if len(sys.argv) > 1 else 'native-server/src/server'
nodes = sorted(set(n[:-3] if n.endswith('.rs') else n for n in os.listdir(root) if n != 'mod.rs'))
edges = collections.defaultdict(set)
for dp, _, fs in os.walk(root):
    for f in fs:
        if not f.endswith('.rs'): continue
        p = os.path.join(dp, f)
        rel = os.path.relpath(p, root).split(os.sep)
        if rel == ['mod.rs']: src = 'mod'
        else: src = rel[0][:-3] if rel[0].endswith('.rs') else rel[0]
        # module path of this file relative to server
        mp = [x[:-3] if x.endswith('.rs') else x for x in rel]
        if mp[-1] == 'mod': mp = mp[:-1]
        text = open(p).read()
        text = re.sub(r'//.*', '', text)
        for m in re.finditer(r'((?:super::)+|crate::server::|crate::)([a-z_][a-z0-9_]*)', text):
            pre, name = m.group(1), m.group(2)
            if pre == 'crate::server::':
                tgt = name
            elif pre == 'crate::':
                continue
            else:
                k = pre.count('super::')
                base = mp[:len(mp)-k] if k <= len(mp) else None
                if base is None: continue
                # for a mod.rs file, super refers to parent of the folder
                if rel[-1] == 'mod.rs':
                    pass
                if len(base) == 0: tgt = name
                else: tgt = base[0]
            if tgt in nodes and tgt != src:
                edges[src].add(tgt)
# tarjan
idx = {}; low = {}; st = []; on = set(); comps = []; c = [0]
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in edges.get(v, ()):
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        comps.append(comp)
sys.setrecursionlimit(10000)
for v in list(nodes) + ['mod']:
    if v not in idx: sc(v)
n = sum(len(v) for v in edges.values())
cyc = [(a, b) for a in edges for b in edges[a] if any(a in cp and b in cp for cp in comps if len(cp) > 1)]
print('edges', n, 'on cycles', len(cyc))
for cp in comps:
    if len(cp) > 1: print('SCC', sorted(cp))
for a, b in sorted(cyc): print(' ', a, '->', b)
