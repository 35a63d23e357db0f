//! The pure entry points the cargo-fuzz targets (fuzz/) call, on their checked-in seeds: the seeds
//! stay meaningful (they decode to what they say), and every input a fuzz run ever crashed on is
//! kept here as a regression test.

use tidegate::client::sse::{EventReader, Item};
use tidegate::config::Config;
use tidegate::core::Zones;
use tidegate::store::{decode_log, replay};

fn seed(target: &str, name: &str) -> Vec<u8> {
    std::fs::read(format!("fuzz/seeds/{target}/{name}")).expect("the seed is checked in")
}

#[test]
fn the_log_seed_decodes_and_replays_to_its_last_version() {
    let data = seed("log_decoder", "framed-log");
    let entries = decode_log(&data[1..]).expect("a valid log");
    assert_eq!(entries.len(), 4);
    let replayed = replay(&entries, &Zones::default()).expect("replays");
    assert_eq!(replayed.state.version(), 4);
    // A torn last line is dropped; the same damage before the end is an error.
    let torn = &data[1..data.len() - 20];
    assert_eq!(decode_log(torn).expect("torn tail dropped").len(), 3);
    let mut damaged = data[1..].to_vec();
    damaged[40] ^= 0x01;
    assert!(decode_log(&damaged).is_err());
}

#[test]
fn the_config_seeds_load_or_name_the_key() {
    let text = String::from_utf8(seed("config_loader", "tidegate.toml")).unwrap();
    let config = Config::from_toml_str(&text).expect("the shipped config loads");
    assert_eq!(config.port, 8080);
    let error = Config::from_toml_str("[units]\ncount = 1\n").unwrap_err().to_string();
    assert!(error.contains("units.count"), "{error}");
    let error = Config::from_toml_str("[units\n").unwrap_err().to_string();
    assert!(!error.is_empty());
}

#[test]
fn the_sse_seeds_parse_plain_and_chunked() {
    for (name, chunked) in [("plain", false), ("chunked", true)] {
        let data = seed("sse_parser", name);
        let mut reader = EventReader::from_bytes(data[1..].to_vec(), chunked);
        assert_eq!(reader.next_item().unwrap(), Some(Item::Comment), "{name}");
        let Some(Item::Event(event)) = reader.next_item().unwrap() else {
            panic!("{name}: an event")
        };
        assert_eq!((event.event.as_str(), event.id.as_deref()), ("routing", Some("7")), "{name}");
        assert_eq!(event.data, "{\"version\":7,\n\"units\":100}", "{name}");
        assert_eq!(reader.next_item().unwrap(), None, "{name}");
    }
    let mut bad_chunk = EventReader::from_bytes(b"zz\r\ndata: x\n\n".to_vec(), true);
    assert!(bad_chunk.next_item().is_err());
}
