// mtmd_ref: dumps llama.cpp mtmd's view of a vision model on a few images, as reference data
// for Weft's vision tests. Written for this repository against the public mtmd.h / mtmd-helper.h
// / llama.h API of the llama.cpp vendored in llama-cpp-python 0.3.36; built by
// scripts/vision/make-references.sh.
//
// usage: mtmd_ref MODEL.gguf MMPROJ.gguf OUT_DIR N_STEPS PROMPT IMAGE...
//   PROMPT holds one media marker "<__media__>" where the image goes; it is tokenized with
//   special tokens parsed and BOS added as the model says.
//
// Per image (file stem S) it writes into OUT_DIR:
//   S.rgb         the RGB bytes mtmd decoded from the file (u8, row-major, nx*ny*3)
//   S.pixels.f32  every tensor the vision encoder was fed, in order (f32 LE, planar
//                 [3][ny][nx] per entry, exactly the encoder's "inp_raw" input)
//   S.embd.f32    the projector output of the image chunks, in chunk order (f32 LE,
//                 [n_tokens][n_embd])
// and one JSON object per image on stdout: shapes, prompt token ids per chunk, and N_STEPS
// greedy tokens after the prompt with each step's top-1 logit and top-1 minus top-2 margin.
//
// The pixel tensors are read with the graph eval callback: when a node consumes the tensor
// named "inp_raw", its data is copied out. The same input can feed two nodes of one graph
// (Qwen2-VL's two patch convolutions), so a capture equal to the previous one is dropped.

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

struct capture {
    bool enabled = false;
    std::vector<std::vector<float>> entries;
    std::vector<std::vector<int64_t>> shapes;
};

static const ggml_tensor * raw_input(const ggml_tensor * t) {
    for (int i = 0; i < GGML_MAX_SRC; i++) {
        if (t->src[i] && std::strcmp(ggml_get_name(t->src[i]), "inp_raw") == 0) {
            return t->src[i];
        }
    }
    return nullptr;
}

// MTMD_REF_DUMP_NODE=NAME (a debugging aid, unused by the references): every graph node
// whose name starts with NAME is written to /tmp/mtmd_ref_<name>_<n>.f32 (f32 nodes only)
static void dump_node(const ggml_tensor * t) {
    static int n = 0;
    const char * want = std::getenv("MTMD_REF_DUMP_NODE");
    if (!want || std::strncmp(ggml_get_name(t), want, std::strlen(want)) != 0 || t->type != GGML_TYPE_F32) {
        return;
    }
    std::vector<float> data(ggml_nelements(t));
    ggml_backend_tensor_get(t, data.data(), 0, ggml_nbytes(t));
    std::string path = "/tmp/mtmd_ref_" + std::string(ggml_get_name(t)) + "_" + std::to_string(n++) + ".f32";
    std::fprintf(stderr, "dump %s [%lld %lld %lld %lld] -> %s\n", ggml_get_name(t), (long long) t->ne[0],
                 (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3], path.c_str());
    FILE * f = std::fopen(path.c_str(), "wb");
    if (f) {
        std::fwrite(data.data(), sizeof(float), data.size(), f);
        std::fclose(f);
    }
}

static bool on_eval(ggml_tensor * t, bool ask, void * user_data) {
    auto * cap = (capture *) user_data;
    const ggml_tensor * src = raw_input(t);
    const char * want = std::getenv("MTMD_REF_DUMP_NODE");
    const bool dump = cap->enabled && want && std::strncmp(ggml_get_name(t), want, std::strlen(want)) == 0;
    if (ask) {
        return (cap->enabled && src != nullptr) || dump;
    }
    if (dump) {
        dump_node(t);
    }
    if (cap->enabled && src != nullptr) {
        if (src->type != GGML_TYPE_F32) {
            std::fprintf(stderr, "inp_raw is not f32\n");
            std::exit(1);
        }
        std::vector<float> data(ggml_nelements(src));
        ggml_backend_tensor_get(src, data.data(), 0, ggml_nbytes(src));
        if (cap->entries.empty() || cap->entries.back() != data) {
            cap->entries.push_back(std::move(data));
            cap->shapes.push_back({src->ne[0], src->ne[1], src->ne[2], src->ne[3]});
        }
    }
    return true;
}

static bool write_file(const std::string & path, const void * data, size_t n) {
    FILE * f = std::fopen(path.c_str(), "wb");
    if (!f) {
        return false;
    }
    bool ok = std::fwrite(data, 1, n, f) == n;
    return std::fclose(f) == 0 && ok;
}

static std::string stem_of(const std::string & path) {
    size_t slash = path.find_last_of('/');
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    size_t dot = name.find_last_of('.');
    return dot == std::string::npos ? name : name.substr(0, dot);
}

int main(int argc, char ** argv) {
    if (argc < 7) {
        std::fprintf(stderr, "usage: %s MODEL MMPROJ OUT_DIR N_STEPS PROMPT IMAGE...\n", argv[0]);
        return 2;
    }
    const char * model_path = argv[1];
    const char * mmproj_path = argv[2];
    const std::string out_dir = argv[3];
    const int n_steps = std::atoi(argv[4]);
    const std::string prompt = argv[5];
    const int n_threads = 2;

    llama_backend_init();
    llama_model_params mparams = llama_model_default_params();
    mparams.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(model_path, mparams);
    if (!model) {
        std::fprintf(stderr, "cannot load %s\n", model_path);
        return 1;
    }
    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = 8192;
    // MTMD_REF_TEXT_FLASH_ATTN=off: the text model without flash attention (a second greedy
    // reference: image prompts of the tiny encoders are sensitive to its f16 accumulation)
    const char * text_fa = std::getenv("MTMD_REF_TEXT_FLASH_ATTN");
    if (text_fa && std::strcmp(text_fa, "off") == 0) {
        cparams.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    cparams.n_batch = 2048;
    cparams.n_ubatch = 2048;
    cparams.n_threads = n_threads;
    cparams.n_threads_batch = n_threads;
    // MTMD_REF_LLAMA_FA=on|off (a debugging aid) forces the text model's flash attention;
    // references use the default (auto)
    if (const char * lfa = std::getenv("MTMD_REF_LLAMA_FA")) {
        cparams.flash_attn_type = std::strcmp(lfa, "on") == 0 ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                                                               : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    // MTMD_REF_KV_TYPE=f32: the text model's KV cache in f32 instead of llama.cpp's default f16
    // (gemma3/greedy_kv_f32_*.json: image prompts of the tiny encoders are sensitive to the f16
    // rounding of the cache and of flash attention's queries)
    if (const char * kvt = std::getenv("MTMD_REF_KV_TYPE")) {
        if (std::strcmp(kvt, "f32") == 0) {
            cparams.type_k = GGML_TYPE_F32;
            cparams.type_v = GGML_TYPE_F32;
        }
    }
    llama_context * lctx = llama_init_from_model(model, cparams);
    if (!lctx) {
        std::fprintf(stderr, "cannot create context\n");
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    capture cap;
    mtmd_context_params vparams = mtmd_context_params_default();
    vparams.use_gpu = false;
    vparams.print_timings = false;
    vparams.n_threads = n_threads;
    // warmup on, as in llama-mtmd-cli and llama-server: it is where clip resolves flash
    // attention "auto" (without it clip runs with flash attention off); nothing is captured
    // then, the callback only records while `enabled`
    vparams.warmup = true;
    // MTMD_REF_FLASH_ATTN=off (a debugging aid) turns clip's flash attention off; references
    // are made with mtmd's default (auto, resolved by the warmup)
    const char * fa = std::getenv("MTMD_REF_FLASH_ATTN");
    if (fa && std::strcmp(fa, "off") == 0) {
        vparams.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    vparams.cb_eval = on_eval;
    vparams.cb_eval_user_data = &cap;
    mtmd_context * mctx = mtmd_init_from_file(mmproj_path, model, vparams);
    if (!mctx) {
        std::fprintf(stderr, "cannot load %s\n", mmproj_path);
        return 1;
    }
    const int n_embd = llama_model_n_embd(model);

    for (int ai = 6; ai < argc; ai++) {
        const std::string img_path = argv[ai];
        const std::string stem = stem_of(img_path);
        mtmd_helper_bitmap_wrapper bw =
            mtmd_helper_bitmap_init_from_file(mctx, img_path.c_str(), false, mtmd_helper_init_opt_default());
        if (!bw.bitmap) {
            std::fprintf(stderr, "cannot decode %s\n", img_path.c_str());
            return 1;
        }
        const uint32_t nx = mtmd_bitmap_get_nx(bw.bitmap);
        const uint32_t ny = mtmd_bitmap_get_ny(bw.bitmap);
        write_file(out_dir + "/" + stem + ".rgb", mtmd_bitmap_get_data(bw.bitmap), mtmd_bitmap_get_n_bytes(bw.bitmap));

        mtmd_input_chunks * chunks = mtmd_input_chunks_init();
        mtmd_input_text text = { prompt.c_str(), prompt.size(), true, true };
        const mtmd_bitmap * bitmaps[1] = { bw.bitmap };
        if (mtmd_tokenize(mctx, chunks, &text, bitmaps, 1) != 0) {
            std::fprintf(stderr, "tokenize failed for %s\n", img_path.c_str());
            return 1;
        }

        std::string chunks_json = "[";
        cap.entries.clear();
        cap.shapes.clear();
        std::vector<float> embd;
        size_t n_img_tokens = 0;
        for (size_t ci = 0; ci < mtmd_input_chunks_size(chunks); ci++) {
            const mtmd_input_chunk * chunk = mtmd_input_chunks_get(chunks, ci);
            if (ci > 0) {
                chunks_json += ",";
            }
            if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
                size_t n = 0;
                const llama_token * toks = mtmd_input_chunk_get_tokens_text(chunk, &n);
                chunks_json += "{\"type\":\"text\",\"tokens\":[";
                for (size_t i = 0; i < n; i++) {
                    chunks_json += (i ? "," : "") + std::to_string(toks[i]);
                }
                chunks_json += "]}";
            } else {
                // a tiled image (Idefics3) is several image chunks with text between them:
                // their pixels and embeddings are appended in chunk order
                cap.enabled = true;
                if (mtmd_encode_chunk(mctx, chunk) != 0) {
                    std::fprintf(stderr, "encode failed for %s\n", img_path.c_str());
                    return 1;
                }
                cap.enabled = false;
                const size_t n_tok = mtmd_input_chunk_get_n_tokens(chunk);
                n_img_tokens += n_tok;
                const float * out = mtmd_get_output_embd(mctx);
                embd.insert(embd.end(), out, out + n_tok * (size_t) n_embd);
                chunks_json += "{\"type\":\"image\",\"n_tokens\":" + std::to_string(n_tok) +
                               ",\"n_pos\":" + std::to_string(mtmd_input_chunk_get_n_pos(chunk)) + "}";
            }
        }
        chunks_json += "]";

        std::vector<float> pixels;
        std::string shapes_json = "[";
        for (size_t i = 0; i < cap.entries.size(); i++) {
            pixels.insert(pixels.end(), cap.entries[i].begin(), cap.entries[i].end());
            const auto & s = cap.shapes[i];
            // ggml order is [nx, ny, channels, batch]; written as [batch, channels, ny, nx]
            shapes_json += std::string(i ? "," : "") + "[" + std::to_string(s[3]) + "," + std::to_string(s[2]) +
                           "," + std::to_string(s[1]) + "," + std::to_string(s[0]) + "]";
        }
        shapes_json += "]";
        write_file(out_dir + "/" + stem + ".pixels.f32", pixels.data(), pixels.size() * sizeof(float));
        write_file(out_dir + "/" + stem + ".embd.f32", embd.data(), embd.size() * sizeof(float));

        // greedy generation after image + prompt
        llama_memory_clear(llama_get_memory(lctx), true);
        llama_pos n_past = 0;
        if (mtmd_helper_eval_chunks(mctx, lctx, chunks, 0, 0, (int32_t) cparams.n_batch, true, &n_past) != 0) {
            std::fprintf(stderr, "eval failed for %s\n", img_path.c_str());
            return 1;
        }
        std::string gen_json = "[", margin_json = "[", top1_json = "[";
        llama_batch batch = llama_batch_init(1, 0, 1);
        for (int step = 0; step < n_steps; step++) {
            const float * logits = llama_get_logits_ith(lctx, -1);
            int best = 0, second = -1;
            for (int v = 1; v < n_vocab; v++) {
                if (logits[v] > logits[best]) {
                    second = best;
                    best = v;
                } else if (second < 0 || logits[v] > logits[second]) {
                    second = v;
                }
            }
            char buf[64];
            gen_json += (step ? "," : "") + std::to_string(best);
            std::snprintf(buf, sizeof buf, "%s%.6g", step ? "," : "", logits[best] - logits[second]);
            margin_json += buf;
            std::snprintf(buf, sizeof buf, "%s%.6g", step ? "," : "", logits[best]);
            top1_json += buf;
            batch.n_tokens = 1;
            batch.token[0] = best;
            batch.pos[0] = n_past++;
            batch.n_seq_id[0] = 1;
            batch.seq_id[0][0] = 0;
            batch.logits[0] = 1;
            if (llama_decode(lctx, batch) != 0) {
                std::fprintf(stderr, "decode failed at step %d\n", step);
                return 1;
            }
        }
        llama_batch_free(batch);
        gen_json += "]";
        margin_json += "]";
        top1_json += "]";

        std::printf("{\"image\":\"%s\",\"decoded\":[%u,%u],\"pixel_shapes\":%s,\"n_embd\":%d,"
                    "\"n_image_tokens\":%zu,\"chunks\":%s,\"greedy\":%s,\"margin\":%s,\"top1_logit\":%s}\n",
                    stem.c_str(), ny, nx, shapes_json.c_str(), n_embd, n_img_tokens, chunks_json.c_str(),
                    gen_json.c_str(), margin_json.c_str(), top1_json.c_str());
        std::fflush(stdout);
        mtmd_input_chunks_free(chunks);
        mtmd_bitmap_free(bw.bitmap);
    }
    mtmd_free(mctx);
    llama_free(lctx);
    llama_model_free(model);
    return 0;
}
