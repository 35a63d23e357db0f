//! The answers of `GET /v1/tag` and `POST /v1/tag`, built without any HTTP framework: the body,
//! the headers' values and the `{"error", "detail"}` failures. The Rocket routes (`http::tag`,
//! `http::edge`) and the fast listener (`http_fast`) all call these functions, so their answers
//! are byte for byte the same.

use std::borrow::Cow;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::core::{Fallback, RoutingTable, TagError, UnitError, UnitMap, ZoneId, validate_user_id};
use crate::telemetry::TagCounters;

/// A refused tag request: an HTTP status, a stable code and a sentence, plus extra fields merged
/// into the body (the failing `index` of a batch). The HTTP edges render it as
/// `{"error": code, "detail": detail, ...extra}`.
#[derive(Debug)]
pub struct Failure {
    pub status: u16,
    pub code: &'static str,
    pub detail: String,
    pub extra: Map<String, Value>,
}

impl Failure {
    pub fn new(status: u16, code: &'static str, detail: impl Into<String>) -> Failure {
        Failure { status, code, detail: detail.into(), extra: Map::new() }
    }

    pub fn bad_request(code: &'static str, detail: impl Into<String>) -> Failure {
        Failure::new(400, code, detail)
    }

    pub fn with(mut self, key: &str, value: Value) -> Failure {
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// The error body every HTTP edge answers with (`http::error::ApiError::body` builds the
    /// same object from the same fields).
    pub fn body(&self) -> Value {
        error_body(self.code, &self.detail, &self.extra)
    }
}

/// `{"error": code, "detail": detail, ...extra}`, in that order.
pub fn error_body(code: &str, detail: &str, extra: &Map<String, Value>) -> Value {
    let mut body = Map::new();
    body.insert("error".into(), json!(code));
    body.insert("detail".into(), json!(detail));
    body.extend(extra.clone());
    Value::Object(body)
}

impl From<UnitError> for Failure {
    fn from(e: UnitError) -> Failure {
        Failure::bad_request("invalid_user_id", e.to_string())
    }
}

impl From<TagError> for Failure {
    fn from(e: TagError) -> Failure {
        match e {
            TagError::InvalidUserId(e) => e.into(),
            TagError::Untagged => Failure::bad_request("missing_user_id", e.to_string()),
            TagError::ChannelUnavailable(_) => {
                Failure::new(503, "channel_unavailable", e.to_string())
            }
        }
    }
}

/// A successful tag answer: the JSON body, the colour for `x-tidegate-color` (single tags only)
/// and the routing version for `x-tidegate-version`.
#[derive(Debug)]
pub struct Answer {
    pub body: String,
    /// The lane for `x-tidegate-color` (borrowed for the two colours, which every table has).
    pub color: Option<Cow<'static, str>>,
    pub version: u64,
}

#[derive(Serialize)]
struct TagBody<'a> {
    user_id: Option<&'a str>,
    /// The routing domain asked for (absent when none was: the default domain).
    #[serde(skip_serializing_if = "Option::is_none")]
    domain: Option<&'a str>,
    color: &'a str,
    unit: Option<u32>,
    zone: &'a str,
    version: u64,
    pinned: bool,
    /// The service asked about, and the rule that decided for it (`pin`, `channel:<name>`,
    /// `unit`, or `fallback` without a user ID); both absent when no service was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    service: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<Cow<'a, str>>,
}

/// `body` as compact JSON, written into a buffer of `capacity` bytes to start with.
pub fn json(body: &impl Serialize, capacity: usize) -> String {
    let mut out = Vec::with_capacity(capacity);
    serde_json::to_writer(&mut out, body).expect("API bodies always serialise");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Room for a `GET /v1/tag` body with a long user ID and zone names, so it is not regrown.
const TAG_BODY_CAPACITY: usize = 192;
/// The `user_id` query parameter of a raw query string (without the `?`), decoded strictly:
/// `+` is a space, percent escapes must decode to UTF-8. Rocket's own form decoding would replace
/// bytes that are not UTF-8 with U+FFFD (so all such IDs would collide) and turn a repeated
/// parameter into "none given" (a random colour); both are 400 here.
pub fn user_id_param(query: Option<&str>) -> Result<Option<Cow<'_, str>>, Failure> {
    user_param(query, "user_id")
}

/// [`user_id_param`] under another parameter name (the edge gate's `edge.user_query`): the
/// same strict decoding, and a repeated parameter is refused the same way.
pub fn user_param<'q>(
    query: Option<&'q str>,
    param: &str,
) -> Result<Option<Cow<'q, str>>, Failure> {
    let mut found = None;
    for segment in query.into_iter().filter(|q| !q.is_empty()).flat_map(|q| q.split('&')) {
        let (name, value) = segment.split_once('=').unwrap_or((segment, ""));
        if name != param {
            continue;
        }
        if found.is_some() {
            return Err(Failure::bad_request(
                "invalid_user_id",
                format!("{param} is given more than once; give exactly one"),
            ));
        }
        found = Some(url_decode(value).ok_or_else(|| {
            Failure::bad_request(
                "invalid_user_id",
                format!("{param} is not valid UTF-8 once percent-decoded"),
            )
        })?);
    }
    Ok(found)
}

/// The first `name` parameter of a raw query, form-decoded (bytes that are not UTF-8 become
/// U+FFFD, as Rocket's own form fields do); for labels, not user IDs.
pub fn query_param<'q>(query: Option<&'q str>, name: &str) -> Option<Cow<'q, str>> {
    let segment = query?.split('&').find(|s| s.split_once('=').unwrap_or((s, "")).0 == name)?;
    let value = segment.split_once('=').map_or("", |(_, v)| v);
    let plus_free = value.replace('+', " ");
    let decoded = percent_encoding::percent_decode(plus_free.as_bytes()).decode_utf8_lossy();
    Some(if decoded == value { Cow::Borrowed(value) } else { Cow::Owned(decoded.into_owned()) })
}

/// Form decoding: `+` to space, then percent escapes; `None` if the result is not UTF-8.
fn url_decode(value: &str) -> Option<Cow<'_, str>> {
    let plus_free: Cow<'_, str> = if value.contains('+') {
        Cow::Owned(value.replace('+', " "))
    } else {
        Cow::Borrowed(value)
    };
    match percent_encoding::percent_decode(plus_free.as_bytes()).decode_utf8().ok()? {
        Cow::Owned(decoded) => Some(Cow::Owned(decoded)),
        Cow::Borrowed(_) => Some(plus_free),
    }
}

/// The `domain` query parameter, decoded strictly like `user_id` (absent: the default domain).
pub fn domain_param(query: Option<&str>) -> Result<Option<Cow<'_, str>>, Failure> {
    user_param(query, "domain").map_err(|e| Failure::bad_request("unknown_domain", e.detail))
}

/// The unit map of `domain` in `table`, or 400 `unknown_domain` naming the table's domains.
pub fn domain_map<'t>(
    table: &'t RoutingTable,
    domain: Option<&str>,
) -> Result<&'t UnitMap, Failure> {
    table.map_of(domain).ok_or_else(|| {
        Failure::bad_request(
            "unknown_domain",
            format!(
                "domain: there is no routing domain `{}` (domains: {})",
                domain.unwrap_or_default(),
                table.domain_names()
            ),
        )
    })
}

/// The `service` query parameter (absent: no service, the global rule), decoded strictly; a
/// name outside `[a-z0-9_.-]{1,64}` is 400 `invalid_service`.
pub fn service_param(query: Option<&str>) -> Result<Option<Cow<'_, str>>, Failure> {
    let service = user_param(query, "service")
        .map_err(|e| Failure::bad_request("invalid_service", e.detail))?;
    check_service(service.as_deref())?;
    Ok(service)
}

/// 400 `invalid_service` unless `service` is absent or a valid name.
pub fn check_service(service: Option<&str>) -> Result<(), Failure> {
    match service {
        Some(s) if !crate::core::valid_name(s) => Err(Failure::bad_request(
            "invalid_service",
            format!("service: `{s}` is not a service name: 1-64 bytes of [a-z0-9_.-]"),
        )),
        _ => Ok(()),
    }
}

/// `GET /v1/tag` against `table`, in `domain` (`None`: the default domain), for a call of
/// `service` (`None`: the global rule; with one, its release channel may decide and the answer
/// says which rule did).
pub fn tag_one(
    table: &RoutingTable,
    fallback: Fallback,
    counters: &TagCounters,
    user_id: Option<&str>,
    domain: Option<&str>,
    service: Option<&str>,
) -> Result<Answer, Failure> {
    let started = counters.sample_timing().then(Instant::now);
    let map = domain_map(table, domain)?;
    let (color, body) = match user_id {
        Some(user_id) => {
            validate_user_id(user_id)?;
            let (tag, reason) = match service {
                None => (table.tag_in(map, user_id)?, None),
                Some(_) => {
                    let (tag, rule) = table
                        .tag_service(domain, user_id, service)?
                        .expect("domain_map found the domain");
                    (tag, Some(Cow::Owned(rule.describe().into_owned())))
                }
            };
            let body = TagBody {
                user_id: Some(user_id),
                domain,
                color: table.lane(tag.color),
                unit: Some(tag.unit.0),
                zone: table.zone_of(tag.color),
                version: table.version(),
                pinned: tag.pinned,
                service,
                reason,
            };
            (tag.color, body)
        }
        None => {
            let color = table.untagged(fallback, rand::random::<f64>())?;
            let body = TagBody {
                user_id: None,
                domain,
                color: table.lane(color),
                unit: None,
                zone: table.zone_of(color),
                version: table.version(),
                pinned: false,
                service,
                reason: service.map(|_| Cow::Borrowed("fallback")),
            };
            (color, body)
        }
    };
    counters.count(color, 1);
    if let Some(started) = started {
        counters.time(started.elapsed().as_secs_f64());
    }
    Ok(Answer {
        body: json(&body, TAG_BODY_CAPACITY + user_id.map_or(0, str::len)),
        color: Some(table.lane_static(color)),
        version: table.version(),
    })
}

/// `POST /v1/tag`'s body. The IDs borrow from the request body, so a batch of 10 000 IDs is
/// not 10 000 allocations; an ID with a JSON escape in it is decoded into its own string.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest<'r> {
    #[serde(borrow)]
    pub user_ids: Vec<BatchId<'r>>,
    /// The routing domain (absent: the default domain).
    #[serde(default)]
    pub domain: Option<String>,
    /// The service the calls are for (absent: the global rule); each entry then says which
    /// rule decided (`reason`).
    #[serde(default)]
    pub service: Option<String>,
}

/// One user ID of a batch. serde's own `Cow<str>` always allocates inside a `Vec` (only a
/// `Cow` field directly under `#[serde(borrow)]` borrows), hence this visitor; it expects "a
/// string" as `String` does, so the error messages are serde's own.
pub struct BatchId<'r>(pub Cow<'r, str>);

impl std::ops::Deref for BatchId<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'r, 'r> Deserialize<'de> for BatchId<'r> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                v: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }
        deserializer.deserialize_str(Visitor).map(BatchId)
    }
}

/// The failure for a batch body larger than `limits.max_body_bytes`.
pub fn body_too_large() -> Failure {
    Failure::new(
        413,
        "body_too_large",
        "the request body is larger than the configured limit (limits.max_body_bytes)",
    )
}

/// The failure for a body that could not be read (e.g. not UTF-8).
pub fn unreadable_body(e: &dyn std::fmt::Display) -> Failure {
    Failure::bad_request("invalid_body", format!("could not read the body: {e}"))
}

/// The failure for a body that is not the expected JSON.
pub fn invalid_json(e: &serde_json::Error) -> Failure {
    Failure::bad_request("invalid_json", format!("the body is not the expected JSON: {e}"))
}

/// `POST /v1/tag`'s body, parsed as Rocket's JSON guard parses it (`serde_json::from_str`).
pub fn parse_batch(body: &str) -> Result<BatchRequest<'_>, Failure> {
    serde_json::from_str(body).map_err(|e| invalid_json(&e))
}

/// `POST /v1/tag` against `table`: one pass that validates and tags each ID and writes its
/// entry straight into one pre-sized buffer (the table, its zones and the colours' fixed parts
/// are looked up once per batch; the counters are bumped once per batch). The bytes are what
/// `serde_json` writes for `{"version", "tags": [{"user_id", "color", "unit", "zone",
/// "pinned"}]}` (the unit test below compares them).
pub fn tag_batch(
    table: &RoutingTable,
    max: usize,
    counters: &TagCounters,
    request: &BatchRequest<'_>,
) -> Result<Answer, Failure> {
    let ids = &request.user_ids;
    let map = domain_map(table, request.domain.as_deref())?;
    if ids.len() > max {
        return Err(Failure::bad_request(
            "batch_too_large",
            format!("{} user_ids given; at most {max} are allowed per request", ids.len()),
        ));
    }
    if let Some(service) = request.service.as_deref() {
        return tag_batch_for_service(table, counters, request, service);
    }
    // Per colour: what follows the ID up to the unit, and what follows the unit (pinned or not).
    let parts: Vec<_> = table
        .zones()
        .ids()
        .map(|color| {
            let zone = json(&table.zone_of(color), 16);
            let after_unit = |pinned: bool| format!(",\"zone\":{zone},\"pinned\":{pinned}}}");
            (
                format!(",\"color\":{},\"unit\":", json(&table.lane(color), 16)),
                [after_unit(false), after_unit(true)],
            )
        })
        .collect();
    let longest = parts.iter().map(|(a, b)| a.len() + b[0].len() + 1).max().unwrap_or(0);
    let id_bytes: usize = ids.iter().map(|id| id.len()).sum();
    let mut out = Vec::with_capacity(48 + id_bytes + ids.len() * (longest + 16));
    out.extend_from_slice(b"{\"version\":");
    push_u64(&mut out, table.version());
    if let Some(domain) = &request.domain {
        out.extend_from_slice(b",\"domain\":");
        push_json_str(&mut out, domain);
    }
    out.extend_from_slice(b",\"tags\":[");
    let mut counts = vec![0u64; parts.len()];
    for (i, user_id) in ids.iter().enumerate() {
        let user_id: &str = user_id;
        let tag =
            validate_user_id(user_id).and_then(|()| table.tag_in(map, user_id)).map_err(|e| {
                Failure::bad_request("invalid_user_id", format!("user_ids[{i}]: {e}"))
                    .with("index", json!(i))
            })?;
        counts[tag.color.index()] += 1;
        let (after_id, after_unit) = &parts[tag.color.index()];
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"user_id\":");
        push_json_str(&mut out, user_id);
        out.extend_from_slice(after_id.as_bytes());
        push_u64(&mut out, u64::from(tag.unit.0));
        out.extend_from_slice(after_unit[usize::from(tag.pinned)].as_bytes());
    }
    out.extend_from_slice(b"]}");
    for (i, n) in counts.iter().enumerate() {
        counters.count(ZoneId(i as u16), *n);
    }
    let body = String::from_utf8(out).expect("built from UTF-8 pieces");
    Ok(Answer { body, color: None, version: table.version() })
}

/// `POST /v1/tag` with a `service`: each entry as the single answer has it, with the rule that
/// decided (`reason`). Not the hand-written fast path: a release channel's batch is rarer.
fn tag_batch_for_service(
    table: &RoutingTable,
    counters: &TagCounters,
    request: &BatchRequest<'_>,
    service: &str,
) -> Result<Answer, Failure> {
    #[derive(Serialize)]
    struct Entry<'a> {
        user_id: &'a str,
        color: &'a str,
        unit: u32,
        zone: &'a str,
        pinned: bool,
        reason: Cow<'a, str>,
    }
    #[derive(Serialize)]
    struct Body<'a> {
        version: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        domain: Option<&'a str>,
        service: &'a str,
        tags: Vec<Entry<'a>>,
    }
    check_service(Some(service))?;
    let domain = request.domain.as_deref();
    let mut counts = vec![0u64; table.zones().len()];
    let mut tags = Vec::with_capacity(request.user_ids.len());
    for (i, user_id) in request.user_ids.iter().enumerate() {
        let user_id: &str = user_id;
        let at = |e: String| {
            Failure::bad_request("invalid_user_id", format!("user_ids[{i}]: {e}"))
                .with("index", json!(i))
        };
        validate_user_id(user_id).map_err(|e| at(e.to_string()))?;
        let (tag, rule) = match table.tag_service(domain, user_id, Some(service)) {
            Ok(found) => found.expect("domain_map found the domain"),
            Err(TagError::InvalidUserId(e)) => return Err(at(e.to_string())),
            Err(e) => return Err(Failure::from(e).with("index", json!(i))),
        };
        counts[tag.color.index()] += 1;
        tags.push(Entry {
            user_id,
            color: table.lane(tag.color),
            unit: tag.unit.0,
            zone: table.zone_of(tag.color),
            pinned: tag.pinned,
            reason: Cow::Owned(rule.describe().into_owned()),
        });
    }
    for (i, n) in counts.iter().enumerate() {
        counters.count(ZoneId(i as u16), *n);
    }
    let body = Body { version: table.version(), domain, service, tags };
    Ok(Answer {
        body: json(&body, 64 * request.user_ids.len()),
        color: None,
        version: table.version(),
    })
}

/// `value` as a JSON string: copied as is when nothing in it needs escaping (the common case),
/// else written by serde_json.
fn push_json_str(out: &mut Vec<u8>, value: &str) {
    if value.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        serde_json::to_writer(&mut *out, value).expect("a string always serialises");
    } else {
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
    }
}

/// `n` in decimal.
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_id_is_form_decoded_strictly() {
        let id = |q: &str| user_id_param(Some(q)).map(|v| v.map(Cow::into_owned));
        assert_eq!(id("user_id=a%20b+c").unwrap().as_deref(), Some("a b c"));
        assert_eq!(id("x=1&user_id=caf%C3%A9").unwrap().as_deref(), Some("café"));
        assert_eq!(id("x=1").unwrap(), None);
        assert_eq!(user_id_param(None).unwrap().map(Cow::into_owned), None);
        assert_eq!(id("user_id").unwrap().as_deref(), Some(""));
        assert_eq!(id("user_id=%ff").unwrap_err().code, "invalid_user_id");
        assert!(id("user_id=a&user_id=b").unwrap_err().detail.contains("more than once"));
    }

    /// What the batch answer was before it was written by hand: serde_json over these structs.
    #[derive(Serialize)]
    struct SerdeTag<'a> {
        user_id: &'a str,
        color: &'a str,
        unit: u32,
        zone: &'a str,
        pinned: bool,
    }

    #[derive(Serialize)]
    struct SerdeBody<'a> {
        version: u64,
        tags: Vec<SerdeTag<'a>>,
    }

    #[test]
    fn the_batch_answer_is_what_serde_json_writes() {
        use crate::core::{UnitMode, UnitScheme, Zones};
        let zones = Zones::two("az-\"b\\lue", "zone-é");
        let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
        let pins = [("pinned-1".to_owned(), ZoneId::GREEN)].into();
        let table = RoutingTable::from_parts(7, scheme, 37, pins, zones).unwrap();
        let body = r#"{"user_ids":["a","pinned-1","quo\"te","back\\slash","caf\u00e9","é😀",
            "x\/y","42"]}"#;
        let request = parse_batch(body).unwrap();
        assert!(matches!(request.user_ids[0].0, Cow::Borrowed(_)), "a plain ID is borrowed");
        let counters = TagCounters::new(&table);
        let answer = tag_batch(&table, 100, &counters, &request).unwrap();
        let tags = request
            .user_ids
            .iter()
            .map(|id| {
                let tag = table.tag(id).unwrap();
                SerdeTag {
                    user_id: id,
                    color: table.lane(tag.color),
                    unit: tag.unit.0,
                    zone: table.zone_of(tag.color),
                    pinned: tag.pinned,
                }
            })
            .collect();
        let expected =
            serde_json::to_string(&SerdeBody { version: table.version(), tags }).unwrap();
        assert_eq!(answer.body, expected);
        assert!(answer.body.contains(r#""pinned":true"#), "the pin is in the answer");
        let failure =
            tag_batch(&table, 100, &counters, &parse_batch(r#"{"user_ids":["a",""]}"#).unwrap())
                .unwrap_err();
        assert_eq!((failure.code, failure.extra["index"].as_u64()), ("invalid_user_id", Some(1)));
        let wrong = parse_batch(r#"{"user_ids":[1]}"#).err().unwrap();
        assert_eq!(
            wrong.detail,
            "the body is not the expected JSON: invalid type: integer `1`, expected a string at line 1 column 14"
        );
    }
}
