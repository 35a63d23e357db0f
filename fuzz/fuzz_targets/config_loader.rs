//! The configuration loader (figment over the defaults) on arbitrary TOML text: a `Config` or a
//! `ConfigError` naming the key, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidegate::config::Config;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::from_toml_str(text);
    }
});
