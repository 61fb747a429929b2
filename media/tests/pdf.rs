//! PDF page rendering on tests/data/media/scan3.pdf (made by scripts/media/make_test_media.py):
//! three US Letter pages, each one embedded PNG with solid blocks:
//! 1: top half (200,30,30), bottom half (30,30,200); 2: left half (30,160,30), right white;
//! 3: white with a (20,20,20) rectangle over the middle half in each direction.

use std::path::PathBuf;

use image::RgbImage;
use weft_media::pdf::{render_pages, PdfOptions};
use weft_media::Error;

fn scan3() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/media/scan3.pdf");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The colour at a point given as fractions of the page's width and height.
fn at(page: &RgbImage, fx: f64, fy: f64) -> [u8; 3] {
    let x = (fx * f64::from(page.width())) as u32;
    let y = (fy * f64::from(page.height())) as u32;
    page.get_pixel(x, y).0
}

fn assert_near(got: [u8; 3], want: [u8; 3], what: &str) {
    for c in 0..3 {
        assert!(
            got[c].abs_diff(want[c]) <= 6,
            "{what}: {got:?}, expected {want:?}"
        );
    }
}

const WHITE: [u8; 3] = [255, 255, 255];

#[test]
fn renders_every_page_with_its_content() {
    let pdf = render_pages(&scan3(), &PdfOptions::default()).unwrap();
    assert_eq!(
        (pdf.page_count, pdf.pages.len(), pdf.truncated()),
        (3, 3, false)
    );
    for page in &pdf.pages {
        // 612 x 792 pt: 150 dpi would give 1275 x 1650, the 1536-pixel cap wins.
        // 612 * 1536 / 792 = 1186.9.
        assert_eq!(page.dimensions(), (1187, 1536));
    }
    let [p1, p2, p3] = &pdf.pages[..] else {
        unreachable!()
    };
    assert_near(at(p1, 0.5, 0.25), [200, 30, 30], "page 1 top");
    assert_near(at(p1, 0.5, 0.75), [30, 30, 200], "page 1 bottom");
    assert_near(at(p2, 0.25, 0.5), [30, 160, 30], "page 2 left");
    assert_near(at(p2, 0.75, 0.5), WHITE, "page 2 right");
    assert_near(at(p3, 0.5, 0.5), [20, 20, 20], "page 3 middle");
    assert_near(at(p3, 0.1, 0.1), WHITE, "page 3 corner");
}

#[test]
fn page_count_is_capped() {
    let options = PdfOptions {
        max_pages: 2,
        ..PdfOptions::default()
    };
    let pdf = render_pages(&scan3(), &options).unwrap();
    assert_eq!(
        (pdf.page_count, pdf.pages.len(), pdf.truncated()),
        (3, 2, true)
    );
    assert_near(at(&pdf.pages[1], 0.25, 0.5), [30, 160, 30], "page 2 left");
    for bad in [
        PdfOptions {
            max_pages: 0,
            ..PdfOptions::default()
        },
        PdfOptions {
            max_side: 0,
            ..PdfOptions::default()
        },
        PdfOptions {
            max_side: 70000,
            ..PdfOptions::default()
        },
        PdfOptions {
            dpi: 0.0,
            ..PdfOptions::default()
        },
        PdfOptions {
            dpi: f32::NAN,
            ..PdfOptions::default()
        },
    ] {
        let err = render_pages(&scan3(), &bad);
        assert!(
            matches!(err, Err(Error::InvalidOption(_))),
            "{bad:?}: {err:?}"
        );
    }
}

#[test]
fn dpi_sets_the_size_under_the_cap() {
    let options = PdfOptions {
        dpi: 72.0,
        max_side: 4096,
        ..PdfOptions::default()
    };
    let pdf = render_pages(&scan3(), &options).unwrap();
    assert_eq!(pdf.pages[0].dimensions(), (612, 792));
    let options = PdfOptions {
        max_side: 100,
        ..PdfOptions::default()
    };
    let pdf = render_pages(&scan3(), &options).unwrap();
    assert_eq!(pdf.pages[0].dimensions(), (77, 100));
}

#[test]
fn garbage_and_truncated_files_are_errors() {
    for bytes in [&b""[..], b"not a pdf at all", b"%PDF-1.4\n%%EOF\n"] {
        let err = render_pages(bytes, &PdfOptions::default());
        assert!(matches!(err, Err(Error::Corrupt(_))), "{bytes:?}: {err:?}");
    }
    // Cut before the page tree is complete: nothing to render.
    let bytes = scan3();
    let err = render_pages(&bytes[..200], &PdfOptions::default());
    assert!(matches!(err, Err(Error::Corrupt(_))), "{err:?}");
}

/// A one-page PDF whose page draws one image XObject of the given declared size, with a correct
/// cross-reference table.
fn pdf_with_image(width: u32, height: u32) -> Vec<u8> {
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] \
         /Resources << /XObject << /Im0 4 0 R >> >> /Contents 5 0 R >>"
            .to_string(),
        format!(
            "<< /Type /XObject /Subtype /Image /Width {width} /Height {height} \
             /ColorSpace /DeviceGray /BitsPerComponent 8 /Length 4 >>\nstream\n````\nendstream"
        ),
        "<< /Length 25 >>\nstream\nq 100 0 0 100 0 0 cm /Im0 Do Q\nendstream".to_string(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

#[test]
fn an_oversized_embedded_image_is_refused_unread() {
    // 2x2 grey (96 = `): renders (the page is that grey all over).
    let pdf = render_pages(&pdf_with_image(2, 2), &PdfOptions::default()).unwrap();
    assert_near(at(&pdf.pages[0], 0.5, 0.5), [96, 96, 96], "grey image");
    // 30000 x 30000 declared: refused from the dictionary.
    let err = render_pages(&pdf_with_image(30000, 30000), &PdfOptions::default());
    assert!(
        matches!(&err, Err(Error::TooLarge(m)) if m.contains("30000x30000")),
        "{err:?}"
    );
}
