//! Chat templates: rendering `tokenizer.chat_template` (Jinja) with messages and tools.
