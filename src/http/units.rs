//! The N-zone operator API: unit-set moves (`PUT /v1/units`), an evacuation that spreads a
//! zone's units by headroom (`POST /v1/units/evacuate`), the zone lifecycle (`POST /v1/zones`,
//! `POST /v1/zones/{zone}/retire`) and the global writer (`PUT /v1/global-writer`).
//!
//! Each handler parses its body into one core command (naming the field of any bad input), asks
//! the capacity view about the receiving zones where units move, and submits through
//! [`super::submit`]: the compare-and-set and the audit record are the same as for the dial.

use rocket::fairing::AdHoc;
use rocket::http::Status;
use rocket::serde::json::Json;
use rocket::{State, delete, get, post, put, routes};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, json_error};
pub(super) use super::holds::units_change_body;
use super::holds::{HoldRequest, ReleaseRequest, Waited};
use super::idempotency::{IdempotencyKey, Scoped};
use super::routing::{Keyed, keyed, submit_keyed};
use super::tag::Versioned;
use super::{App, now_ms};
use crate::core::{
    Command, DEFAULT_DOMAIN, RoutingTable, UnitMap, UnitMove, UnitSet, Verdict, ZoneClass, ZoneId,
    ZoneSpec, spread_by_headroom,
};
use crate::service::routing_frames::routing_body;

type JsonBody<'r, T> = Result<Json<T>, rocket::serde::json::Error<'r>>;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("units", |rocket| async {
        rocket.mount(
            "/",
            routes![
                put_units,
                get_changes,
                cancel_change,
                evacuate_units,
                post_zone,
                retire_zone,
                put_global_writer,
                post_domain,
                post_hold,
                delete_hold
            ],
        )
    })
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct MoveBody {
    /// `25-49`, `25-49,60`: units of the table.
    units: String,
    /// The receiving zone, by name or lane.
    zone: String,
    /// The routing domain (absent: the default domain).
    #[serde(default)]
    domain: Option<String>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct UnitsRequest {
    moves: Vec<MoveBody>,
    expected_version: u64,
    reason: String,
    #[serde(default)]
    force: bool,
    /// Answer the projection and the resulting map without changing anything.
    #[serde(default)]
    dry_run: bool,
    /// Loss-less: freeze the units that change owner, move them once every live subscriber has
    /// the freeze, unfreeze once every one has the move (default: the server's
    /// `[freeze] by_default`, off unless configured: the move is at once).
    #[serde(default)]
    freeze: Option<bool>,
    /// The freeze's maximum window (`[freeze] window`, 30s, by default; at most `10m`).
    #[serde(default)]
    freeze_window: Option<String>,
}

/// A zone of `table` by name or lane; 400 `unknown_zone` naming `field` otherwise.
pub(super) fn zone_named(
    table: &RoutingTable,
    field: &str,
    name: &str,
) -> Result<ZoneId, ApiError> {
    let zone = table.zones().resolve(name).map_err(|_| {
        ApiError::bad_request(
            "unknown_zone",
            format!(
                "{field}: `{name}` is not a zone or lane of this table (zones: {})",
                table.zones().names()
            ),
        )
    })?;
    if table.zones().get(zone).is_some_and(|z| z.retired) {
        return Err(ApiError::new(
            Status::Conflict,
            "zone_retired",
            format!("{field}: zone `{name}` is retired"),
        ));
    }
    Ok(zone)
}

/// The moves of a request, checked against `table` with every error naming its field.
fn parse_moves(table: &RoutingTable, moves: &[MoveBody]) -> Result<Vec<UnitMove>, ApiError> {
    if moves.is_empty() {
        return Err(ApiError::bad_request(
            "invalid_units",
            "moves: the list is empty; name at least one unit set",
        ));
    }
    let mut out: Vec<UnitMove> = Vec::with_capacity(moves.len());
    for (i, m) in moves.iter().enumerate() {
        let units = UnitSet::parse(&m.units, table.units()).map_err(|e| {
            ApiError::bad_request("invalid_units", format!("moves[{i}].units: {e}"))
        })?;
        let domain = m.domain.clone().filter(|d| d != DEFAULT_DOMAIN);
        if let Some(d) = &domain
            && !table.domains().contains_key(d)
        {
            return Err(unknown_domain(table, &format!("moves[{i}].domain"), d));
        }
        for (j, earlier) in out.iter().enumerate() {
            if earlier.domain != domain {
                continue;
            }
            if let Some(unit) = earlier.units.overlaps(&units) {
                return Err(ApiError::bad_request(
                    "invalid_units",
                    format!("moves[{i}].units: unit {unit} is also in moves[{j}].units"),
                ));
            }
        }
        let zone = zone_named(table, &format!("moves[{i}].zone"), &m.zone)?;
        out.push(UnitMove { units, zone, domain });
    }
    Ok(out)
}

/// The named domain of a request's `domain` field: `None` for absent or `default`, the name
/// when the table has it, else 400 `unknown_domain` naming the field.
pub(super) fn named_domain(
    table: &RoutingTable,
    domain: Option<&str>,
) -> Result<Option<String>, ApiError> {
    match domain {
        None | Some(DEFAULT_DOMAIN) => Ok(None),
        Some(name) if table.domains().contains_key(name) => Ok(Some(name.to_owned())),
        Some(name) => Err(unknown_domain(table, "domain", name)),
    }
}

/// 400 `unknown_domain` naming `field` and the table's domains.
fn unknown_domain(table: &RoutingTable, field: &str, name: &str) -> ApiError {
    ApiError::bad_request(
        "unknown_domain",
        format!("{field}: there is no routing domain `{name}` (domains: {})", table.domain_names()),
    )
}

/// The capacity verdicts of the default domain's map becoming `next` and each named domain's
/// becoming its map in `next_domains` (a zone gaining units in several domains is judged on the
/// sum), one object per receiving zone; the first blocking one.
///
/// Load follows the routed maps ([`crate::core::routed_map`]): units a release channel keeps in
/// its zone carry no load when the map moves them. `except_channel` is left out of the "after"
/// map: the channel a `PUT /v1/channels` replaces (`next` already holds its new units).
pub(super) async fn project(
    app: &App,
    table: &std::sync::Arc<RoutingTable>,
    next: &UnitMap,
    next_domains: &std::collections::BTreeMap<String, UnitMap>,
    except_channel: Option<&str>,
) -> Result<(Vec<Value>, Option<Verdict>), ApiError> {
    if !app.capacities.is_configured() {
        return Ok((Vec::new(), None));
    }
    let capacities = std::sync::Arc::clone(&app.capacities);
    let (t, n, d) = (std::sync::Arc::clone(table), next.clone(), next_domains.clone());
    let except = except_channel.map(str::to_owned);
    let verdicts = rocket::tokio::task::spawn_blocking(move || {
        let routed = |domain: &str, map: &UnitMap, skip: Option<&str>| {
            let channels = t
                .channels()
                .values()
                .filter(|c| c.domain_name() == domain && Some(c.name.as_str()) != skip);
            crate::core::routed_map(map, channels)
        };
        let mut changes = vec![(
            routed(DEFAULT_DOMAIN, t.map(), None),
            routed(DEFAULT_DOMAIN, &n, except.as_deref()),
        )];
        for (name, after) in &d {
            if let Some(before) = t.domains().get(name) {
                changes.push((routed(name, before, None), routed(name, after, except.as_deref())));
            }
        }
        let changes: Vec<(&UnitMap, &UnitMap)> = changes.iter().map(|(b, a)| (b, a)).collect();
        capacities.judge_maps(&t, &changes, now_ms())
    })
    .await
    .map_err(|e| ApiError::new(Status::InternalServerError, "internal", e.to_string()))?;
    let blocking = verdicts.iter().find(|(_, v)| v.blocks()).map(|(_, v)| v.clone());
    let body = verdicts
        .iter()
        .map(|(zone, v)| {
            let (projected, allowed) = match v {
                Verdict::Fits(p) | Verdict::Exceeds(p) => {
                    (json!(p.projected_rps), json!(p.allowed_rps))
                }
                _ => (Value::Null, Value::Null),
            };
            json!({
                "zone": table.zone_of(*zone),
                "lane": table.lane(*zone),
                "verdict": match v {
                    Verdict::Unchecked => "unchecked",
                    Verdict::Fits(_) => "fits",
                    Verdict::Exceeds(_) => "exceeds",
                    Verdict::Unknown { .. } => "unknown",
                },
                "projected_rps": projected,
                "allowed_rps": allowed,
                "explain": v.explain(),
            })
        })
        .collect();
    Ok((body, blocking))
}

/// Judges, previews or submits a map change: the common tail of `PUT /v1/units` and the
/// evacuation.
/// How a map change is asked for: the version it expects, who and why, and how.
struct MoveAsk {
    expected_version: u64,
    by: String,
    reason: String,
    force: bool,
    dry_run: bool,
    key: Option<Scoped>,
    /// Loss-less (`freeze`): the freeze's window; the answer is 202 with the move in progress.
    window: Option<u64>,
    /// The freeze came from `[freeze] by_default`, not the request: answer when it has ended.
    wait: bool,
    /// Receivers an evacuation left out, each with why (in the answer and the audit).
    skipped: Vec<String>,
    /// An evacuation: the zone's pinned users, who stay in it (a pin outranks the map).
    pinned_left: Option<(String, usize)>,
}

async fn move_to(
    app: &State<App>,
    table: std::sync::Arc<RoutingTable>,
    moves: Vec<UnitMove>,
    ask: MoveAsk,
) -> Result<(Status, Versioned), ApiError> {
    let MoveAsk {
        expected_version,
        by,
        mut reason,
        force,
        dry_run,
        key,
        window,
        wait,
        skipped,
        pinned_left,
    } = ask;
    let pinned_note = pinned_left.as_ref().filter(|(_, n)| *n > 0).map(|(zone, n)| {
        format!("{n} pinned user(s) stay in {zone}: a pin outranks the unit map; unpin them to move them")
    });
    if let Some(note) = &pinned_note {
        reason = format!("{reason} [{note}]");
    }
    if !skipped.is_empty() {
        reason = format!("{reason} [receivers skipped: {}]", skipped.join("; "));
    }
    let (next, next_domains) =
        app.coordinator.state().moved_maps(&moves).map_err(ApiError::from)?;
    let moved = table.map().diff(&next).len()
        + next_domains
            .iter()
            .map(|(name, map)| table.domains().get(name).map_or(0, |m| m.diff(map).len()))
            .sum::<usize>();
    let (projection, blocking) = project(app, &table, &next, &next_domains, None).await?;
    let moves_body: Vec<Value> = moves
        .iter()
        .map(|m| {
            json!({
                "units": m.units.to_string(),
                "zone": table.zone_of(m.zone),
                "lane": table.lane(m.zone),
                "domain": m.domain.as_deref().unwrap_or(DEFAULT_DOMAIN),
            })
        })
        .collect();
    if dry_run {
        let freeze = window.map(|_| frozen_preview(&table, &next, &next_domains));
        let preview = RoutingTable::from_map(
            table.version(),
            *table.scheme(),
            next,
            table.pins().clone(),
            table.zones().clone(),
            table.global(),
        )
        .and_then(|t| t.with_domains(next_domains))
        .map_err(|e| ApiError::new(Status::InternalServerError, "internal", e.to_string()))?;
        let preview_body = routing_body(&preview, app.coordinator.log_id());
        let body = json!({
            "dry_run": true,
            "moves": moves_body,
            "moved_units": moved,
            "projection": projection,
            "would_refuse": blocking.as_ref().map(Verdict::explain),
            "unit_map": preview_body["unit_map"].clone(),
            "domains": preview_body["domains"].clone(),
            "freeze": freeze,
            "skipped_receivers": skipped,
            "pinned_users_left": pinned_left.as_ref().map(|(_, n)| *n),
            "note": pinned_note,
        });
        return Ok((Status::Ok, Versioned::new(&body, table.version())));
    }
    if let Some(verdict) = blocking {
        if !force {
            return Err(ApiError::insufficient_capacity(&verdict));
        }
        reason = format!("{reason} [forced: insufficient_capacity: {}]", verdict.explain());
    }
    let at_once = Command::MoveUnits { moves: moves.clone() };
    let command = match window {
        Some(window_ms) => Command::FreezeUnits { moves, pins: vec![], global: None, window_ms },
        None => at_once.clone(),
    };
    let send = |command: Command, reason: String| {
        let (by, key) = (by.clone(), key.clone());
        async move {
            match &key {
                Some(key) => submit_keyed(app, command, expected_version, by, reason, key).await,
                None => super::submit(app, command, Some(expected_version), by, reason).await,
            }
        }
    };
    let (submitted, window) = match send(command, reason.clone()).await {
        // Frozen only by default, and a live replica of an older release cannot read a freeze:
        // move at once, as that release would, and say so in the audit.
        Err(e) if wait && window.is_some() && super::freeze_wait::unreadable(&e) => {
            (send(at_once, super::freeze_wait::at_once_reason(&reason)).await?, None)
        }
        other => (other?, window),
    };
    let changed = submitted.applied.is_some();
    let within_hold = super::freeze_wait::within_hold(&submitted);
    let mut body = routing_body(&submitted.table, app.coordinator.log_id());
    body["changed"] = json!(changed);
    // A loss-less move has frozen its units; it moves them once every subscriber has the freeze
    // (inside a held hold it moved at once: the hold froze them).
    let freezing = changed && window.is_some() && !within_hold;
    if window.is_some() {
        body["within_hold"] = json!(within_hold);
    }
    body["moved_units"] = json!(if changed && !freezing { moved } else { 0 });
    body["moves"] = Value::Array(moves_body);
    body["projection"] = Value::Array(projection);
    if !skipped.is_empty() {
        body["skipped_receivers"] = json!(skipped);
    }
    if let Some((_, n)) = &pinned_left {
        body["pinned_users_left"] = json!(n);
    }
    if let Some(note) = &pinned_note {
        body["note"] = json!(note);
    }
    if window.is_some() {
        body["change"] = units_change_body(&app.coordinator.state());
    }
    let answer = Versioned::new(&body, submitted.table.version());
    if let Some(key) = &key {
        app.idempotency.answered(key, answer.body(), submitted.table.version());
    }
    // Frozen by default, not asked: answer once the move has ended, as an unfrozen move does.
    if let (true, Some(window_ms)) = (freezing && wait, window) {
        let (version, key) = (submitted.change_version(), key.as_ref());
        let decorate = |done: &mut Value| {
            done["moved_units"] = json!(moved);
            done["moves"] = body["moves"].clone();
            done["projection"] = body["projection"].clone();
        };
        if let Some(done) =
            super::freeze_wait::default_freeze_end(app, version, window_ms, key, decorate).await?
        {
            return Ok((Status::Ok, done));
        }
    }
    Ok((if freezing { Status::Accepted } else { Status::Ok }, answer))
}

/// What a loss-less move from `table`'s maps to `next` would freeze, by domain.
fn frozen_preview(
    table: &RoutingTable,
    next: &UnitMap,
    next_domains: &std::collections::BTreeMap<String, UnitMap>,
) -> Value {
    let set = |a: &UnitMap, b: &UnitMap| {
        crate::core::UnitSet::from_sorted(&a.diff(b)).unwrap_or_default().to_string()
    };
    let mut out = serde_json::Map::new();
    out.insert(DEFAULT_DOMAIN.into(), json!(set(table.map(), next)));
    for (name, after) in next_domains {
        if let Some(before) = table.domains().get(name) {
            out.insert(name.clone(), json!(set(before, after)));
        }
    }
    out.retain(|_, v| v.as_str().is_some_and(|s| !s.is_empty()));
    Value::Object(out)
}

/// The `Idempotency-Key` of a map change (none for a dry run, which changes nothing): a
/// replayed answer, or the scoped key to submit under.
fn key_for(
    app: &App,
    key: IdempotencyKey,
    by: &str,
    request: &impl Serialize,
    dry_run: bool,
) -> Result<Result<Option<Scoped>, Versioned>, ApiError> {
    if dry_run {
        return Ok(Ok(None));
    }
    Ok(match keyed(app, key, by, request)? {
        Keyed::Answered(answer) => Err(answer),
        Keyed::Submit(key) => Ok(Some(key)),
    })
}

/// `PUT /v1/units`: gives explicit unit sets to zones, all in one version.
#[put("/v1/units", data = "<request>")]
async fn put_units(
    app: &State<App>,
    caller: Caller,
    key: IdempotencyKey,
    request: JsonBody<'_, UnitsRequest>,
) -> Result<(Status, Versioned), ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let window = super::drains::freeze_from(
        &app.config,
        super::drains::FreezeKind::Move,
        r.freeze,
        r.freeze_window.as_deref(),
        "invalid_units",
    )?;
    let key = match key_for(app, key, &by, &r, r.dry_run)? {
        Ok(key) => key,
        Err(answered) => return Ok((Status::Ok, answered)),
    };
    let table = app.coordinator.table();
    let moves = parse_moves(&table, &r.moves)?;
    let ask = MoveAsk {
        expected_version: r.expected_version,
        by,
        reason: r.reason,
        force: r.force,
        dry_run: r.dry_run,
        key,
        window,
        wait: r.freeze.is_none(),
        skipped: Vec::new(),
        pinned_left: None,
    };
    move_to(app, table, moves, ask).await
}

/// `GET /v1/changes`: the loss-less changes in progress, a unit move's and a channel's (each
/// `null` when none runs).
#[get("/v1/changes")]
fn get_changes(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let state = app.coordinator.state();
    Ok(Json(json!({
        "version": state.version(),
        "units": units_change_body(&state),
        "channel": super::channels::change_body_of(&state),
    })))
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct CancelRequest {
    expected_version: u64,
    reason: String,
}

/// `POST /v1/changes/cancel`: undoes the loss-less unit move or pin change in progress while it
/// is still freezing (nothing has changed owner yet): its units thaw in one audited version and
/// nothing moves; a request waiting for it (frozen by default) answers 409 `freeze_aborted`
/// with this reason. Once switched it cannot be undone (409 `change_switched`): it unfreezes
/// when every live subscriber has the switch, or at its window.
#[post("/v1/changes/cancel", data = "<request>")]
async fn cancel_change(
    app: &State<App>,
    caller: Caller,
    request: JsonBody<'_, CancelRequest>,
) -> Result<Json<Value>, ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let state = app.coordinator.state();
    let Some(change) = state.units_change() else {
        return Err(ApiError::new(
            Status::Conflict,
            "no_change_in_progress",
            "no loss-less unit move or pin change is in progress (GET /v1/changes)",
        ));
    };
    if let Some((switched, _)) = change.phases.switched {
        return Err(ApiError::new(
            Status::Conflict,
            "change_switched",
            format!(
                "the change frozen at version {} switched at version {switched}: its users have their new owner, so it cannot be undone; it unfreezes once every live subscriber has the switch, or at its window",
                change.phases.frozen_version
            ),
        ));
    }
    let frozen_version = change.phases.frozen_version;
    let reason = format!("cancelled: {}", r.reason);
    let command = Command::UnfreezeUnits { aborted: true };
    let submitted = super::submit(app, command, Some(r.expected_version), by, reason).await?;
    let mut body = routing_body(&submitted.table, app.coordinator.log_id());
    body["changed"] = json!(submitted.applied.is_some());
    body["cancelled"] = json!({"frozen_version": frozen_version});
    Ok(Json(body))
}

/// `POST /v1/holds`: freezes the units named (and global writes, with `global`) in place and
/// answers once every live subscriber refuses their writes: 200 `held`; 409 `freeze_aborted`
/// when one did not apply the freeze within `freeze_window` (undone, nothing was held); 202 when
/// the loop has not decided by the window and some slack.
#[post("/v1/holds", data = "<request>")]
async fn post_hold(
    app: &State<App>,
    caller: Caller,
    request: JsonBody<'_, HoldRequest>,
) -> Result<(Status, Json<Value>), ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let command =
        super::holds::command_of(&r, &app.coordinator.table(), app.config.freeze_window_ms)?;
    let Command::HoldUnits { window_ms, .. } = command else { unreachable!("a hold") };
    let submitted = super::submit(app, command, Some(r.expected_version), by, r.reason).await?;
    let frozen_version = submitted.change_version();
    match super::holds::held(&app.coordinator, frozen_version, window_ms).await {
        Waited::Held => {
            Ok((Status::Ok, Json(super::holds::hold_body(&app.coordinator.state(), true))))
        }
        Waited::Running => {
            Ok((Status::Accepted, Json(super::holds::hold_body(&app.coordinator.state(), false))))
        }
        Waited::Ended => {
            let records = app.coordinator.audit(256);
            let end = records
                .iter()
                .rev()
                .find(|r| r.version > frozen_version && r.action == "units_unfreeze");
            let reason = end.map_or("the hold ended before it was held", |r| r.reason.as_str());
            Err(ApiError::new(
                Status::Conflict,
                "freeze_aborted",
                format!(
                    "the hold frozen at version {frozen_version} ended before every live subscriber applied it, so nothing was held: {reason}"
                ),
            ))
        }
    }
}

/// `DELETE /v1/holds`: releases the hold in progress (its units thaw in one audited version; a
/// hold not yet held is undone). 409 `no_hold` when none is in progress.
#[delete("/v1/holds", data = "<request>")]
async fn delete_hold(
    app: &State<App>,
    caller: Caller,
    request: JsonBody<'_, ReleaseRequest>,
) -> Result<Json<Value>, ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let state = app.coordinator.state();
    let Some(change) = state.units_change().filter(|c| c.hold_ms.is_some()) else {
        return Err(ApiError::new(
            Status::Conflict,
            "no_hold",
            "no hold is in progress (GET /v1/changes shows the unit change in progress, if any)",
        ));
    };
    let aborted = change.phases.switched.is_none();
    let frozen_version = change.phases.frozen_version;
    let reason = format!("released: {}", r.reason);
    let command = Command::UnfreezeUnits { aborted };
    let submitted = super::submit(app, command, Some(r.expected_version), by, reason).await?;
    Ok(Json(json!({
        "version": submitted.table.version(),
        "released": {"frozen_version": frozen_version, "was_held": !aborted},
    })))
}

/// The live zones but `source` an evacuation that names no receivers may give units to, and
/// the ones it leaves out with why ([`crate::service::receivers::choose`]).
async fn healthy_receivers(
    app: &App,
    table: &RoutingTable,
    source: ZoneId,
) -> Result<(Vec<ZoneId>, Vec<String>), ApiError> {
    let health = std::sync::Arc::clone(&app.health);
    let coordinator = std::sync::Arc::clone(&app.coordinator);
    let max = app.config.drain.evacuate.guard.max_error_rate;
    let table = table.clone();
    // The Prometheus source queries over the network.
    let choice = rocket::tokio::task::spawn_blocking(move || {
        let state = coordinator.state();
        crate::service::receivers::choose(&health, &state, &table, source, max, now_ms())
    })
    .await
    .map_err(|e| ApiError::new(Status::InternalServerError, "internal", e.to_string()))?;
    Ok((choice.chosen.clone(), choice.skipped_reasons()))
}

/// Before an evacuation: a loss-less unit move or pin change in progress would hold it for up
/// to its window (a hung subscriber), so the evacuation pre-empts it at the version the
/// operator expects. Still freezing, it is undone (nothing moved); switched, it is unfrozen
/// now (every subscriber applied its freeze, so one that has not applied the switch still
/// refuses those writes: the argument of an unfreeze at the window). Answers the version the
/// evacuation then expects. A dry run pre-empts nothing.
async fn preempt(app: &App, expected_version: u64, by: &str, why: &str) -> Result<u64, ApiError> {
    let state = app.coordinator.state();
    let Some(change) = state.units_change() else { return Ok(expected_version) };
    if state.version() != expected_version {
        return Ok(expected_version); // the evacuation's own check answers the conflict
    }
    let aborted = change.phases.switched.is_none();
    let reason = format!(
        "pre-empted by an evacuation ({why}): the change frozen at version {} {}",
        change.phases.frozen_version,
        if aborted { "is undone, nothing moved" } else { "is unfrozen after its switch" }
    );
    let command = Command::UnfreezeUnits { aborted };
    let submitted =
        super::submit(app, command, Some(expected_version), by.to_owned(), reason).await?;
    Ok(submitted.table.version())
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct EvacuateRequest {
    /// The zone to empty, by name or lane.
    zone: String,
    /// The receiving zones; absent: every other live zone.
    #[serde(default)]
    to: Option<Vec<String>>,
    expected_version: u64,
    reason: String,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    dry_run: bool,
    /// Loss-less: freeze the zone's units first (default: off; an evacuation is speed first).
    #[serde(default)]
    freeze: Option<bool>,
    #[serde(default)]
    freeze_window: Option<String>,
}

/// `POST /v1/units/evacuate`: moves every unit of one zone to the others in one version, split
/// by each receiver's free room under its capacity (evenly where no capacity is known), each
/// receiver taking a contiguous slice of the evacuated units in zone order.
#[post("/v1/units/evacuate", data = "<request>")]
async fn evacuate_units(
    app: &State<App>,
    caller: Caller,
    key: IdempotencyKey,
    request: JsonBody<'_, EvacuateRequest>,
) -> Result<(Status, Versioned), ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    // Speed first: an evacuation freezes only when asked (docs/src/drains.md).
    let window = super::drains::freeze_from(
        &app.config,
        super::drains::FreezeKind::OnRequest,
        r.freeze,
        r.freeze_window.as_deref(),
        "invalid_units",
    )?;
    let key = match key_for(app, key, &by, &r, r.dry_run)? {
        Ok(key) => key,
        Err(answered) => return Ok((Status::Ok, answered)),
    };
    let source = zone_named(&app.coordinator.table(), "zone", &r.zone)?;
    let expected_version = if r.dry_run {
        r.expected_version
    } else {
        preempt(app, r.expected_version, &by, &format!("evacuate {}", r.zone)).await?
    };
    let table = app.coordinator.table();
    let mut skipped = Vec::new();
    let receivers: Vec<ZoneId> = match &r.to {
        Some(names) => {
            let mut out = Vec::new();
            for (i, name) in names.iter().enumerate() {
                let zone = zone_named(&table, &format!("to[{i}]"), name)?;
                if zone == source {
                    return Err(ApiError::bad_request(
                        "invalid_units",
                        format!("to[{i}]: `{name}` is the zone being evacuated"),
                    ));
                }
                if !out.contains(&zone) {
                    out.push(zone);
                }
            }
            out
        }
        None => {
            let (chosen, left_out) = healthy_receivers(app, &table, source).await?;
            skipped = left_out;
            if chosen.is_empty() {
                return Err(ApiError::new(
                    Status::Conflict,
                    "no_receiver",
                    format!(
                        "no zone may receive {}'s units: {}; name receivers in `to` to override",
                        r.zone,
                        skipped.join("; ")
                    ),
                ));
            }
            chosen
        }
    };
    if receivers.is_empty() {
        return Err(ApiError::bad_request(
            "invalid_units",
            "to: no zone is left to receive the units (a move may not leave the table without a zone)",
        ));
    }
    let units: Vec<u32> = table.map().units_of(source).collect();
    let domain_units: usize = table.domains().values().map(|m| m.count(source) as usize).sum();
    if units.is_empty() && domain_units == 0 {
        return Err(ApiError::new(
            Status::Conflict,
            "invalid_units",
            format!("zone: `{}` owns no units; there is nothing to evacuate", r.zone),
        ));
    }
    let rooms: Vec<Option<f64>> = {
        let capacities = std::sync::Arc::clone(&app.capacities);
        let (t, rs) = (std::sync::Arc::clone(&table), receivers.clone());
        rocket::tokio::task::spawn_blocking(move || {
            rs.iter().map(|z| capacities.room(&t, *z, now_ms())).collect()
        })
        .await
        .map_err(|e| ApiError::new(Status::InternalServerError, "internal", e.to_string()))?
    };
    // Every domain's units leave the zone, each domain split the same way, in one version.
    let mut moves = Vec::new();
    let mut per_domain: Vec<(Option<String>, Vec<u32>)> = vec![(None, units)];
    for (name, map) in table.domains() {
        per_domain.push((Some(name.clone()), map.units_of(source).collect()));
    }
    for (domain, units) in per_domain {
        if units.is_empty() {
            continue;
        }
        let counts = spread_by_headroom(units.len() as u32, &rooms);
        let mut next = 0usize;
        for (zone, count) in receivers.iter().zip(counts) {
            if count == 0 {
                continue;
            }
            let slice = &units[next..next + count as usize];
            next += count as usize;
            let mut ranges: Vec<(u32, u32)> = Vec::new();
            for &u in slice {
                match ranges.last_mut() {
                    Some((_, hi)) if *hi + 1 == u => *hi = u,
                    _ => ranges.push((u, u)),
                }
            }
            let units = UnitSet::from_ranges(ranges, table.units()).map_err(|e| {
                ApiError::new(Status::InternalServerError, "internal", e.to_string())
            })?;
            moves.push(UnitMove { units, zone: *zone, domain: domain.clone() });
        }
    }
    let reason = format!("{} [evacuate {}]", r.reason, table.zone_of(source));
    let ask = MoveAsk {
        expected_version,
        by,
        reason,
        force: r.force,
        dry_run: r.dry_run,
        key,
        window,
        // An evacuation freezes only when asked, and then answers 202.
        wait: false,
        skipped,
        pinned_left: Some((
            table.zone_of(source).to_owned(),
            table.pins().values().filter(|z| **z == source).count(),
        )),
    };
    move_to(app, table, moves, ask).await
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ZoneRequest {
    name: String,
    lane: String,
    #[serde(default)]
    class: Option<String>,
    expected_version: u64,
    reason: String,
}

/// `POST /v1/zones`: adds a zone (it owns nothing until units are moved to it).
#[post("/v1/zones", data = "<request>")]
async fn post_zone(
    app: &State<App>,
    caller: Caller,
    request: JsonBody<'_, ZoneRequest>,
) -> Result<Json<Value>, ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let class = match r.class.as_deref() {
        None => ZoneClass::Rzone,
        Some(c) => ZoneClass::parse(c)
            .map_err(|e| ApiError::bad_request("invalid_zone", format!("class: {e}")))?,
    };
    for (field, value) in [("name", &r.name), ("lane", &r.lane)] {
        crate::core::validate_zone_name(value)
            .map_err(|e| ApiError::bad_request("invalid_zone", format!("{field}: {e}")))?;
    }
    let command = Command::AddZone { spec: ZoneSpec::new(&r.name, &r.lane, class) };
    answer(app, command, r.expected_version, by, r.reason).await
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RetireRequest {
    expected_version: u64,
    reason: String,
}

/// `POST /v1/zones/{zone}/retire`: refused while the zone owns units or pins, takes global
/// writes, or runs lane consumers (as far as the lane authority's count tells).
#[post("/v1/zones/<zone>/retire", data = "<request>")]
async fn retire_zone(
    app: &State<App>,
    caller: Caller,
    zone: &str,
    request: JsonBody<'_, RetireRequest>,
) -> Result<Json<Value>, ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let table = app.coordinator.table();
    let id = zone_named(&table, "zone", zone)?;
    let name = table.zone_of(id).to_owned();
    if let Some(members) = app.lanes.members_by_zone(now_ms())
        && let Some(n) = members.get(&name).filter(|n| **n > 0)
    {
        return Err(ApiError::new(
            Status::Conflict,
            "zone_busy",
            format!("zone `{name}` still runs {n} lane consumer(s); stop them first"),
        ));
    }
    answer(app, Command::RetireZone { zone: id }, r.expected_version, by, r.reason).await
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct GlobalWriterRequest {
    /// The zone that takes global writes (name or lane), or `null` for none.
    zone: Option<String>,
    #[serde(default)]
    read_only: bool,
    expected_version: u64,
    reason: String,
    /// Loss-less: freeze global writes, switch the writer once every live subscriber has the
    /// freeze, unfreeze once every one has the switch (default: `[freeze] by_default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    freeze: Option<bool>,
    /// The freeze's maximum window (`[freeze] window`, 30s, by default; at most `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    freeze_window: Option<String>,
}

/// `PUT /v1/global-writer`: the zone that takes writes to global data and the read-only flag.
/// Moving the global writer to another zone is a change of owner of global data, made
/// loss-less like a unit move (`freeze`, `freeze_window`, `[freeze] by_default`): global writes
/// are frozen everywhere, the writer switches once every live subscriber has the freeze, and
/// they resume once every one has the switch. A read-only flag alone moves no owner: at once.
#[put("/v1/global-writer", data = "<request>")]
async fn put_global_writer(
    app: &State<App>,
    caller: Caller,
    key: IdempotencyKey,
    request: JsonBody<'_, GlobalWriterRequest>,
) -> Result<(Status, Versioned), ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let window = super::drains::freeze_from(
        &app.config,
        super::drains::FreezeKind::Move,
        r.freeze,
        r.freeze_window.as_deref(),
        "invalid_body",
    )?;
    let key = match keyed(app, key, &by, &r)? {
        Keyed::Answered(answer) => return Ok((Status::Ok, answer)),
        Keyed::Submit(key) => key,
    };
    let table = app.coordinator.table();
    let zone = match &r.zone {
        Some(name) => Some(zone_named(&table, "zone", name)?),
        None => None,
    };
    let change = super::routing::OwnerChange {
        moves: Vec::new(),
        at_once: Command::SetGlobalWriter { zone, read_only: r.read_only },
        moves_owner: zone != table.global().zone,
        pins: Vec::new(),
        global: Some(crate::core::GlobalWriter { zone, read_only: r.read_only, frozen: false }),
    };
    let ask =
        super::routing::ChangeAsk { expected_version: r.expected_version, by, reason: r.reason };
    super::routing::owner_change(app, change, window, r.freeze.is_none(), ask, key).await
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct DomainRequest {
    name: String,
    expected_version: u64,
    reason: String,
}

/// `POST /v1/domains`: adds a routing domain as a copy of the default domain's map (so every
/// user's zone agrees across the two until one of them moves units).
#[post("/v1/domains", data = "<request>")]
async fn post_domain(
    app: &State<App>,
    caller: Caller,
    request: JsonBody<'_, DomainRequest>,
) -> Result<Json<Value>, ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    crate::core::validate_zone_name(&r.name)
        .map_err(|e| ApiError::bad_request("invalid_domain", format!("name: {e}")))?;
    answer(app, Command::AddDomain { name: r.name }, r.expected_version, by, r.reason).await
}

/// Submits and answers the table the change produced.
async fn answer(
    app: &State<App>,
    command: Command,
    expected_version: u64,
    by: String,
    reason: String,
) -> Result<Json<Value>, ApiError> {
    let submitted = super::submit(app, command, Some(expected_version), by, reason).await?;
    let mut body = routing_body(&submitted.table, app.coordinator.log_id());
    body["changed"] = json!(submitted.applied.is_some());
    Ok(Json(body))
}
