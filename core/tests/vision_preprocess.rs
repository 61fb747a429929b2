//! Image decoding and Gemma 3 preprocessing against llama.cpp mtmd's own data
//! (tests/data/vision/, made by scripts/vision/make-references.sh): the decoded pixels, the
//! padded 896x896 image and the f32 tensor the encoder was fed, for five images of different
//! sizes and aspect ratios. Also the decoder's formats, EXIF orientation and bad inputs.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use weft_core::vision::{
    decode_image, gemma3, idefics3, qwen2vl, DecodeLimits, ImageError, PixelTensor, RgbImage,
};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/vision")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn decode(path: &Path) -> RgbImage {
    decode_image(&read(path), &DecodeLimits::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn index(family: &str) -> serde_json::Value {
    serde_json::from_slice(&read(&data_dir().join(family).join("index.json"))).unwrap()
}

fn triple(v: &serde_json::Value) -> [f32; 3] {
    let a: Vec<f32> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    [a[0], a[1], a[2]]
}

fn stem(name: &str) -> &str {
    name.rsplit_once('.').unwrap().0
}

/// Runs `preprocess` on every reference image of `family` (starting from the RGB mtmd
/// decoded, so this is about preprocessing alone) and checks each encoder input against mtmd's:
/// the 8-bit image sample by sample, the shape, and the SHA-256 of all the f32 tensors.
fn check_family(
    family: &str,
    preprocess: impl Fn(&RgbImage, [f32; 3], [f32; 3]) -> (Vec<RgbImage>, Vec<PixelTensor>),
) {
    let ix = index(family);
    let dir = data_dir().join(family);
    let (mean, std) = (triple(&ix["pixel_mean"]), triple(&ix["pixel_std"]));
    let images = ix["images"].as_array().unwrap();
    assert_eq!(images.len(), 5);
    for e in images {
        let name = e["image"].as_str().unwrap();
        let src = decode(&dir.join(e["decoded_png"].as_str().unwrap()));
        let hw = e["decoded_hw"].as_array().unwrap();
        assert_eq!(
            (src.height as u64, src.width as u64),
            (hw[0].as_u64().unwrap(), hw[1].as_u64().unwrap()),
            "{family} {name}: decoded size"
        );
        let (imgs, tensors) = preprocess(&src, mean, std);
        let pngs = e["pixel_pngs"].as_array().unwrap();
        let shapes = e["pixel_shapes_bchw"].as_array().unwrap();
        assert_eq!(
            (imgs.len(), tensors.len()),
            (pngs.len(), shapes.len()),
            "{family} {name}: encoder inputs"
        );
        let mut hasher = Sha256::new();
        for (k, ((img, tensor), (png, shape))) in imgs
            .iter()
            .zip(&tensors)
            .zip(pngs.iter().zip(shapes))
            .enumerate()
        {
            let want = decode(&dir.join(png.as_str().unwrap()));
            assert_eq!(
                (img.width, img.height),
                (want.width, want.height),
                "{family} {name} input {k}: size"
            );
            let differing = img
                .data
                .iter()
                .zip(&want.data)
                .filter(|(a, b)| a != b)
                .count();
            assert_eq!(
                differing, 0,
                "{family} {name} input {k}: {differing} samples differ from mtmd's"
            );
            let shape: Vec<usize> = shape
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as usize)
                .collect();
            assert_eq!(
                vec![1, tensor.channels, tensor.height, tensor.width],
                shape,
                "{family} {name} input {k}"
            );
            hasher.update(tensor.to_le_bytes());
        }
        let hash = format!("{:x}", hasher.finalize());
        assert_eq!(
            hash,
            e["pixels_f32_sha256"].as_str().unwrap(),
            "{family} {name}: f32 tensors differ from mtmd's"
        );
    }
}

#[test]
fn gemma3_preprocessing_is_pixel_identical_to_mtmd() {
    check_family("gemma3", |img, mean, std| {
        let (square, tensor) = gemma3(img, 896, mean, std);
        (vec![square], vec![tensor])
    });
}

#[test]
fn qwen25vl_preprocessing_is_pixel_identical_to_mtmd() {
    // 14 px patches, 2x2 merge: sides in multiples of 28, 8 to 4096 merged tokens (mtmd's limits)
    check_family("qwen25vl", |img, mean, std| {
        let (fitted, tensor) = qwen2vl(img, 28, 8, 4096, mean, std);
        (vec![fitted], vec![tensor])
    });
}

#[test]
fn idefics3_preprocessing_is_pixel_identical_to_mtmd() {
    // SmolVLM: 2048 px longest edge, 512 px tiles
    check_family("idefics3", |img, mean, std| {
        let (t, tensors) = idefics3(img, 2048, 512, mean, std);
        let mut imgs = t.tiles;
        imgs.push(t.overview);
        (imgs, tensors)
    });
}

#[test]
fn decoding_matches_mtmd_exactly_for_png_and_closely_for_jpeg() {
    let ix = index("gemma3");
    let dir = data_dir();
    for e in ix["images"].as_array().unwrap() {
        let name = e["image"].as_str().unwrap();
        let ours = decode(&dir.join("images").join(name));
        let theirs = decode(&dir.join("gemma3").join(e["decoded_png"].as_str().unwrap()));
        assert_eq!(
            (ours.width, ours.height),
            (theirs.width, theirs.height),
            "{name}"
        );
        let max_diff = ours
            .data
            .iter()
            .zip(&theirs.data)
            .map(|(a, b)| (i16::from(*a) - i16::from(*b)).unsigned_abs())
            .max()
            .unwrap();
        eprintln!("{name}: max {max_diff} levels from mtmd's (stb_image) decoding");
        if name.ends_with(".png") {
            assert_eq!(max_diff, 0, "{name}: PNG decoding is lossless");
        } else {
            // JPEG decoders (stb_image in mtmd, zune-jpeg here) differ in IDCT and chroma
            // upsampling by a few levels; Pillow and stb_image differ by 3 on these files
            assert!(
                max_diff <= 8,
                "{name}: {max_diff} levels from mtmd's decoding"
            );
        }
        assert!(
            stem(name).contains(&format!("{}x{}", ours.width, ours.height)),
            "{name}"
        );
    }
}

/// A 3-colour 32x16 picture: left half red, right half blue, top-left 8x8 corner white.
fn marker_image() -> image::RgbImage {
    image::RgbImage::from_fn(32, 16, |x, y| {
        if x < 8 && y < 8 {
            image::Rgb([255, 255, 255])
        } else if x < 16 {
            image::Rgb([255, 0, 0])
        } else {
            image::Rgb([0, 0, 255])
        }
    })
}

fn encode(img: &image::RgbImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).unwrap();
    out.into_inner()
}

fn near(a: [u8; 3], b: [u8; 3], tol: u8) -> bool {
    a.iter().zip(b).all(|(x, y)| x.abs_diff(y) <= tol)
}

#[test]
fn webp_and_gif_decode_and_gif_gives_its_first_frame() {
    let img = marker_image();
    for format in [
        image::ImageFormat::WebP,
        image::ImageFormat::Gif,
        image::ImageFormat::Png,
    ] {
        let got = decode_image(&encode(&img, format), &DecodeLimits::default()).unwrap();
        assert_eq!((got.width, got.height), (32, 16), "{format:?}");
        assert_eq!(
            got.data,
            img.as_raw().as_slice(),
            "{format:?}: lossless with 3 colours"
        );
    }

    // two frames: the first is the marker image, the second all green
    let mut bytes = Vec::new();
    {
        let mut enc = image::codecs::gif::GifEncoder::new(&mut bytes);
        let first = image::DynamicImage::ImageRgb8(img.clone()).into_rgba8();
        let second = image::RgbaImage::from_pixel(32, 16, image::Rgba([0, 255, 0, 255]));
        enc.encode_frame(image::Frame::new(first)).unwrap();
        enc.encode_frame(image::Frame::new(second)).unwrap();
    }
    let got = decode_image(&bytes, &DecodeLimits::default()).unwrap();
    assert_eq!(
        got.data,
        img.as_raw().as_slice(),
        "animated GIF: the first frame"
    );
}

/// `jpeg` with an APP1 Exif segment holding only an orientation tag, inserted after SOI.
fn with_exif_orientation(jpeg: &[u8], orientation: u16) -> Vec<u8> {
    let mut tiff = Vec::new();
    tiff.extend_from_slice(b"MM\0\x2a\0\0\0\x08"); // big-endian TIFF header, IFD at 8
    tiff.extend_from_slice(&1u16.to_be_bytes()); // one entry
    tiff.extend_from_slice(&0x0112u16.to_be_bytes()); // Orientation
    tiff.extend_from_slice(&3u16.to_be_bytes()); // SHORT
    tiff.extend_from_slice(&1u32.to_be_bytes()); // one value
    tiff.extend_from_slice(&orientation.to_be_bytes());
    tiff.extend_from_slice(&[0, 0]);
    tiff.extend_from_slice(&0u32.to_be_bytes()); // no next IFD
    let mut payload = b"Exif\0\0".to_vec();
    payload.extend_from_slice(&tiff);
    let mut out = jpeg[..2].to_vec(); // SOI
    out.extend_from_slice(&[0xFF, 0xE1]);
    out.extend_from_slice(&((payload.len() + 2) as u16).to_be_bytes());
    out.extend_from_slice(&payload);
    out.extend_from_slice(&jpeg[2..]);
    out
}

#[test]
fn exif_orientation_is_applied() {
    let jpeg = encode(&marker_image(), image::ImageFormat::Jpeg);
    let plain = decode_image(&jpeg, &DecodeLimits::default()).unwrap();
    assert_eq!((plain.width, plain.height), (32, 16));
    assert!(near(plain.pixel(2, 2), [255, 255, 255], 24));

    // 6: the stored image is to be rotated 90 degrees clockwise for display
    let rotated = decode_image(&with_exif_orientation(&jpeg, 6), &DecodeLimits::default()).unwrap();
    assert_eq!((rotated.width, rotated.height), (16, 32));
    // the white corner moves from top-left to top-right; red (left) goes up, blue down
    assert!(
        near(rotated.pixel(13, 2), [255, 255, 255], 24),
        "{:?}",
        rotated.pixel(13, 2)
    );
    assert!(
        near(rotated.pixel(2, 12), [255, 0, 0], 40),
        "{:?}",
        rotated.pixel(2, 12)
    );
    assert!(
        near(rotated.pixel(8, 28), [0, 0, 255], 40),
        "{:?}",
        rotated.pixel(8, 28)
    );

    // 3: rotated 180 degrees
    let flipped = decode_image(&with_exif_orientation(&jpeg, 3), &DecodeLimits::default()).unwrap();
    assert_eq!((flipped.width, flipped.height), (32, 16));
    assert!(near(flipped.pixel(29, 13), [255, 255, 255], 24));
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A PNG signature and IHDR claiming `w` x `h` RGB, then one tiny IDAT and IEND: a few dozen
/// bytes that would decode to w*h*3 bytes.
fn png_header_only(w: u32, h: u32) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut chunk = |kind: &[u8], data: &[u8]| {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    };
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(b"IHDR", &ihdr);
    chunk(b"IDAT", &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]);
    chunk(b"IEND", &[]);
    out
}

#[test]
fn bad_images_are_refused_with_a_reason() {
    let limits = DecodeLimits::default();
    assert_eq!(decode_image(&[], &limits), Err(ImageError::Empty));
    assert_eq!(
        decode_image(b"hello, not an image", &limits),
        Err(ImageError::UnknownFormat)
    );
    // a BMP header: a format `image` recognizes but Weft does not take
    let mut bmp = b"BM".to_vec();
    bmp.resize(64, 0);
    assert!(matches!(decode_image(&bmp, &limits), Err(ImageError::Unsupported(f)) if f == "BMP"));

    // a decompression bomb is refused from its header
    let bomb = png_header_only(30000, 30000);
    assert!(bomb.len() < 100);
    assert_eq!(
        decode_image(&bomb, &limits),
        Err(ImageError::TooLarge {
            width: 30000,
            height: 30000,
            max_pixels: limits.max_pixels
        })
    );

    // a valid header with truncated pixel data, and a cut-off JPEG
    assert!(matches!(
        decode_image(&png_header_only(64, 64), &limits),
        Err(ImageError::Corrupt(_))
    ));
    let jpeg = encode(&marker_image(), image::ImageFormat::Jpeg);
    assert!(matches!(
        decode_image(&jpeg[..jpeg.len() / 2], &limits),
        Err(ImageError::Corrupt(_))
    ));
    let png = encode(&marker_image(), image::ImageFormat::Png);
    assert!(matches!(
        decode_image(&png[..40], &limits),
        Err(ImageError::Corrupt(_))
    ));
}
