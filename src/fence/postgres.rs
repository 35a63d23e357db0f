//! `tidegate fence postgres`: keeps a PostgreSQL database's `tidegate.owners` current.
//!
//! A `Router` (subscriber kind `fence`) watches the coordinators. Its table hook writes each
//! table it takes in one transaction before the Router goes on, and the Router acknowledges a
//! version only after its hook returned: so when a barrier counts this subscriber as having
//! applied a freeze, the database already refuses the frozen units' writes, and the update
//! waited for every write that had checked the old owner (the trigger reads the owner's row
//! `FOR SHARE`). A failed write is retried until it succeeds: meanwhile nothing is
//! acknowledged, and every barrier waits for this database, as it should.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use postgres::{Client, NoTls};

use super::{Rows, SCHEMA_SQL};
use crate::client::{Identity, Router, RouterOptions, TableHook, decode_table};

/// What `tidegate fence postgres` needs.
#[derive(Clone, Debug)]
pub struct Options {
    pub database: String,
    pub coordinators: String,
    pub token: Option<String>,
    pub subscriber_id: String,
    pub zone: String,
    pub domain: String,
}

/// Connects, installs the schema, and follows the coordinators until the process ends.
pub fn run(options: Options) -> Result<(), String> {
    let mut client = connect(&options.database)?;
    client
        .batch_execute(SCHEMA_SQL)
        .map_err(|e| format!("--database: installing the fence's schema: {e}"))?;
    tracing::info!(event = "fence_ready", database = %redact(&options.database), "the fence's schema is installed; following the coordinators");
    let client = Arc::new(Mutex::new(client));
    let hook = {
        let (client, options) = (Arc::clone(&client), options.clone());
        TableHook(Arc::new(move |version, data: &str| store(&client, &options, version, data)))
    };
    let identity = Identity {
        subscriber_id: options.subscriber_id.clone(),
        zone: options.zone.clone(),
        kind: "fence".into(),
    };
    // The fence keeps no lease: the rows it wrote keep deciding writes however long it has
    // not heard from a coordinator, so a barrier must wait for its acknowledgement (or for it
    // to be gone), never only until a lease ran out.
    let router_options = RouterOptions {
        token: options.token.clone(),
        on_table: Some(hook),
        keep_lease: false,
        ..Default::default()
    };
    let _router = Router::connect(&options.coordinators, identity, router_options)
        .map_err(|e| format!("--coordinator: {e}"))?;
    loop {
        std::thread::park();
    }
}

fn connect(url: &str) -> Result<Client, String> {
    Client::connect(url, NoTls)
        .map_err(|e| format!("--database: cannot connect to {}: {e}", redact(url)))
}

/// The URL without its password, for logs and errors.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// The table hook: writes `data`'s table until that succeeds (reconnecting as needed).
fn store(client: &Mutex<Client>, options: &Options, version: u64, data: &str) {
    let rows = serde_json::from_str::<serde_json::Value>(data).map_err(|e| e.to_string()).and_then(
        |value| {
            let table = decode_table(&value).map_err(|e| e.to_string())?;
            let log_id = value.get("log_id").and_then(serde_json::Value::as_str);
            Rows::of(&table, &options.domain, log_id)
        },
    );
    let rows = match rows {
        Ok(rows) => rows,
        Err(e) => {
            // Not acknowledging is all this hook can do about a table it cannot read: it
            // blocks here, the Router stops acknowledging, and every barrier waits (loudly).
            tracing::error!(event = "fence_unreadable_table", version, error = %e, "the fence cannot read routing version {version}: {e}; it acknowledges nothing more");
            loop {
                std::thread::park();
            }
        }
    };
    let mut client = client.lock().unwrap_or_else(|p| p.into_inner());
    let mut delay = Duration::from_millis(100);
    loop {
        let started = std::time::Instant::now();
        match write(&mut client, &rows) {
            Ok(changed) => {
                tracing::info!(
                    event = "fence_stored",
                    version,
                    changed,
                    ms = started.elapsed().as_millis() as u64,
                    "routing version {version} stored ({changed} unit rows changed)"
                );
                return;
            }
            Err(e) => {
                tracing::warn!(event = "fence_store_failed", version, error = %e, "storing routing version {version} failed: {e}; retrying");
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_secs(2));
                if client.is_closed()
                    && let Ok(fresh) = connect(&options.database)
                {
                    *client = fresh;
                }
            }
        }
    }
}

/// One transaction: the routing row, the units whose owner or freeze changed (only those rows
/// are locked, each waiting for the writes that read it `FOR SHARE`), and the pins.
fn write(client: &mut Client, rows: &Rows) -> Result<u64, postgres::Error> {
    let mut tx = client.transaction()?;
    let version = i64::try_from(rows.version).unwrap_or(i64::MAX);
    let units: Vec<i32> = (0..rows.owners.len() as i32).collect();
    let zones: Vec<&str> = rows.owners.iter().map(|(z, _)| z.as_str()).collect();
    let frozen: Vec<bool> = rows.owners.iter().map(|(_, f)| *f).collect();
    tx.execute(
        "INSERT INTO tidegate.owners (domain, unit, zone, frozen, version)
         SELECT $1, u, z, f, $5 FROM unnest($2::integer[], $3::text[], $4::boolean[]) AS n(u, z, f)
         ON CONFLICT (domain, unit) DO NOTHING",
        &[&rows.domain, &units, &zones, &frozen, &version],
    )?;
    let changed = tx.execute(
        "UPDATE tidegate.owners o SET zone = n.z, frozen = n.f, version = $5
         FROM unnest($2::integer[], $3::text[], $4::boolean[]) AS n(u, z, f)
         WHERE o.domain = $1 AND o.unit = n.u AND (o.zone, o.frozen) IS DISTINCT FROM (n.z, n.f)",
        &[&rows.domain, &units, &zones, &frozen, &version],
    )?;
    let users: Vec<&str> = rows.pins.iter().map(|(u, _)| u.as_str()).collect();
    let pin_zones: Vec<&str> = rows.pins.iter().map(|(_, z)| z.as_str()).collect();
    tx.execute("DELETE FROM tidegate.pins WHERE NOT (user_id = ANY($1::text[]))", &[&users])?;
    tx.execute(
        "INSERT INTO tidegate.pins (user_id, zone, version)
         SELECT u, z, $3 FROM unnest($1::text[], $2::text[]) AS n(u, z)
         ON CONFLICT (user_id) DO UPDATE SET zone = EXCLUDED.zone, version = EXCLUDED.version
         WHERE tidegate.pins.zone IS DISTINCT FROM EXCLUDED.zone",
        &[&users, &pin_zones, &version],
    )?;
    tx.execute(
        "INSERT INTO tidegate.routing (id, version, units, log_id) VALUES (true, $1, $2, $3)
         ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, units = EXCLUDED.units,
             log_id = EXCLUDED.log_id",
        &[&version, &(rows.units as i32), &rows.log_id],
    )?;
    tx.commit()?;
    Ok(changed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_stay_out_of_logs() {
        assert_eq!(
            super::redact("postgresql://app:secret@db:5432/shop"),
            "postgresql://app:***@db:5432/shop"
        );
        assert_eq!(super::redact("postgresql://db/shop"), "postgresql://db/shop");
    }
}
