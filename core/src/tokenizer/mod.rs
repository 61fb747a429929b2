//! Tokenizers built from GGUF metadata (SentencePiece, byte-level BPE, WordPiece) or tokenizer.json.
