//! Skills: discovery, install from zip (and the refusals, with nothing written), read, delete,
//! and the skills_list / skills_read tools.

use std::io::{Cursor, Write};

use weft_sandbox::skills::{skills_list, skills_read, InstallLimits, SkillOrigin};
use weft_sandbox::{Error, SkillRegistry};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

const MANIFEST: &str = "---\nname: csv-report\ndescription: Summarise a CSV file into a short report.\nlicense: MIT\n---\n# CSV report\nRun scripts/report.py FILE.\n";

fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    for (name, data) in entries {
        w.start_file(*name, opts).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn registry() -> (tempfile::TempDir, tempfile::TempDir, SkillRegistry) {
    let installed = tempfile::tempdir().unwrap();
    let discovered = tempfile::tempdir().unwrap();
    let reg = SkillRegistry::new(
        Some(installed.path().to_path_buf()),
        vec![discovered.path().to_path_buf()],
    );
    (installed, discovered, reg)
}

fn is_empty(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}

#[test]
fn discovers_folders_with_skill_md() {
    let (_i, discovered, reg) = registry();
    let d = discovered.path();
    std::fs::create_dir_all(d.join("pdf/scripts")).unwrap();
    std::fs::write(
        d.join("pdf/SKILL.md"),
        "---\nname: pdf\ndescription: PDF things.\n---\nUse pypdf.\n",
    )
    .unwrap();
    std::fs::write(d.join("pdf/scripts/extract.py"), "print(1)\n").unwrap();
    std::fs::write(d.join("pdf/references.md"), "refs\n").unwrap();
    std::fs::create_dir_all(d.join("broken")).unwrap();
    std::fs::write(d.join("broken/SKILL.md"), "---\nname: broken\n---\n").unwrap();
    std::fs::create_dir_all(d.join("not-a-skill")).unwrap();
    let listing = reg.list();
    assert_eq!(listing.skills.len(), 1, "{listing:?}");
    let s = &listing.skills[0];
    assert_eq!((s.id.as_str(), s.name.as_str()), ("pdf", "pdf"));
    assert_eq!(s.origin, SkillOrigin::Discovered);
    assert_eq!(s.instructions, "Use pypdf.\n");
    let kinds: Vec<(&str, &str)> = s.files.iter().map(|f| (f.path.as_str(), f.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            ("SKILL.md", "manifest"),
            ("references.md", "reference"),
            ("scripts/extract.py", "script")
        ]
    );
    assert_eq!(listing.errors.len(), 1);
    assert!(
        listing.errors[0].message.contains("'description'"),
        "{:?}",
        listing.errors
    );
    // Discovered skills cannot be deleted.
    assert!(matches!(
        reg.delete("pdf"),
        Err(Error::SkillNotDeletable(_))
    ));
    // Unknown names are an error naming them.
    let e = reg.select(&["pdf".into(), "nope".into()]).unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
}

#[test]
fn installs_reads_and_deletes_a_zip() {
    let (installed, _d, reg) = registry();
    let zip = zip_of(&[
        ("csv-report/SKILL.md", MANIFEST.as_bytes()),
        (
            "csv-report/scripts/report.py",
            b"import sys\nprint(open(sys.argv[1]).read().count('\\n'))\n",
        ),
    ]);
    let s = reg.install_zip(&zip, false).unwrap();
    assert_eq!(s.id, "csv-report");
    assert_eq!(s.origin, SkillOrigin::Installed);
    assert_eq!(s.license.as_deref(), Some("MIT"));
    assert_eq!(s.files.len(), 2);
    assert!(installed
        .path()
        .join("csv-report/scripts/report.py")
        .is_file());
    // A second install needs overwrite.
    assert!(matches!(
        reg.install_zip(&zip, false),
        Err(Error::SkillExists(_))
    ));
    reg.install_zip(&zip, true).unwrap();
    // Contents at the archive root work too (as another name).
    let root_zip = zip_of(&[(
        "SKILL.md",
        MANIFEST.replace("csv-report", "csv-two").as_bytes(),
    )]);
    assert_eq!(reg.install_zip(&root_zip, false).unwrap().id, "csv-two");

    let list = skills_list(&reg, None);
    let names: Vec<&str> = list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["csv-report", "csv-two"]);
    let read = skills_read(&reg, "csv-report", None).unwrap();
    assert!(read["instructions"]
        .as_str()
        .unwrap()
        .starts_with("# CSV report"));
    let file = skills_read(&reg, "csv-report", Some("scripts/report.py")).unwrap();
    assert!(file["content"].as_str().unwrap().contains("count"));
    let e = skills_read(&reg, "csv-report", Some("../csv-two/SKILL.md")).unwrap_err();
    assert!(matches!(e, Error::Path { .. }), "{e}");

    reg.delete("csv-report").unwrap();
    assert!(!installed.path().join("csv-report").exists());
    assert!(reg.get("csv-report").unwrap_err().is_not_found());
}

fn assert_refused(reg: &SkillRegistry, dir: &std::path::Path, zip: &[u8], needle: &str) {
    let e = reg.install_zip(zip, true).unwrap_err();
    assert!(matches!(e, Error::SkillArchive(_)), "{e}");
    assert!(
        e.to_string().contains(needle),
        "expected {needle:?} in: {e}"
    );
    assert!(
        is_empty(dir),
        "something was written: {:?}",
        std::fs::read_dir(dir).unwrap().collect::<Vec<_>>()
    );
}

#[test]
fn refuses_traversal_absolute_paths_and_symlinks() {
    let (installed, _d, reg) = registry();
    let dir = installed.path();
    let evil = zip_of(&[
        ("SKILL.md", MANIFEST.as_bytes()),
        ("../../authorized_keys", b"ssh-rsa AAA"),
    ]);
    assert_refused(&reg, dir, &evil, "`..`");
    assert!(!dir.parent().unwrap().join("authorized_keys").exists());
    let evil = zip_of(&[("SKILL.md", MANIFEST.as_bytes()), ("scripts/../../x", b"x")]);
    assert_refused(&reg, dir, &evil, "`..`");
    let evil = zip_of(&[("SKILL.md", MANIFEST.as_bytes()), ("/etc/cron.d/x", b"x")]);
    assert_refused(&reg, dir, &evil, "absolute");

    let mut w = ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default();
    w.start_file("SKILL.md", opts).unwrap();
    w.write_all(MANIFEST.as_bytes()).unwrap();
    w.add_symlink("scripts/passwd", "/etc/passwd", opts)
        .unwrap();
    let link = w.finish().unwrap().into_inner();
    assert_refused(&reg, dir, &link, "symlink");

    let two = zip_of(&[
        ("a/SKILL.md", MANIFEST.as_bytes()),
        ("b/SKILL.md", MANIFEST.as_bytes()),
    ]);
    assert_refused(&reg, dir, &two, "2 skill folders");
    assert_refused(&reg, dir, b"not a zip at all", "not a readable zip");
    let none = zip_of(&[("README.md", b"hi")]);
    assert_refused(&reg, dir, &none, "no SKILL.md");
}

#[test]
fn refuses_zip_bombs_and_oversized_archives() {
    let (installed, _d, reg) = registry();
    let dir = installed.path();
    // 100 MiB of zeros deflates to about 100 KiB: a 1000x expansion.
    let zeros = vec![0u8; 100 << 20];
    let bomb = zip_of(&[("SKILL.md", MANIFEST.as_bytes()), ("data.bin", &zeros)]);
    assert!(bomb.len() < 1 << 20, "{}", bomb.len());
    assert_refused(&reg, dir, &bomb, "200x");

    // The other limits, made small so the archives stay small.
    let small =
        SkillRegistry::new(Some(dir.to_path_buf()), vec![]).with_install_limits(InstallLimits {
            entries: 8,
            file_bytes: 1000,
            total_bytes: 3000,
            ratio: 1_000_000,
        });
    let many: Vec<(String, Vec<u8>)> = (0..9)
        .map(|i| (format!("f{i}.txt"), b"x".to_vec()))
        .collect();
    let mut entries: Vec<(&str, &[u8])> = vec![("SKILL.md", MANIFEST.as_bytes())];
    entries.extend(many.iter().map(|(n, d)| (n.as_str(), d.as_slice())));
    assert_refused(&small, dir, &zip_of(&entries), "at most 8");
    let big = vec![b'a'; 1001];
    assert_refused(
        &small,
        dir,
        &zip_of(&[("SKILL.md", MANIFEST.as_bytes()), ("big.txt", &big)]),
        "expands past 1000 bytes",
    );
    let part = vec![b'a'; 900];
    assert_refused(
        &small,
        dir,
        &zip_of(&[
            ("SKILL.md", MANIFEST.as_bytes()),
            ("a", &part),
            ("b", &part),
            ("c", &part),
            ("d", &part),
        ]),
        "past 3000 bytes in all",
    );
}
