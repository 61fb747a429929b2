//! Feeds arbitrary bytes to the GGUF parser, as a whole file and as a prefix of a longer one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_core::gguf::{parse_header, ModelFile};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = ModelFile::from_vec(data.to_vec()) {
        // Everything a parsed header promises must be readable.
        for t in &m.gguf.tensors {
            assert_eq!(m.tensor_data(t).len() as u64, t.n_bytes);
        }
        for (_, v) in &m.gguf.metadata {
            let _ = v.to_string();
        }
    }
    // The browser feeds prefixes of a larger file: that path must not panic either.
    let _ = parse_header(data, data.len() as u64 * 2 + 1);
});
