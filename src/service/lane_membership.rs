//! MQ lane membership: which consumers are alive, what each may read, and each half's lag.
//!
//! Membership is in-memory coordinator state, like heartbeats, and is not logged: it describes
//! processes that are running now, and after a coordinator restart every member's next
//! heartbeat gets `member_not_found` and the member registers again (see ARCHITECTURE.md).
//!
//! The assignment rule itself is pure (`core::assign`, `core::grant`). This service feeds it the
//! live members, the colour-to-zone map and the per-zone flags, and keeps the handover protocol:
//! a member reports in each heartbeat the partitions it still holds, and a partition moves to its
//! new owner only once the old owner stopped reading it and committed (it no longer reports it),
//! or missed its session timeout. Members learn assignment changes from their heartbeat answer.
//!
//! Time is an argument (`now_ms`) of every method, so the rules are testable in virtual time;
//! [`run`] is the loop that reads the clock, expires members and reads lag from Kafka.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::LanesConfig;
use crate::core::{
    Assignment, AssignmentInput, LaneConfig, LaneError, LaneMember, ZoneFlags, ZoneId, Zones,
    assign, grant, half_lags, hold_unvouched, partition_lag,
};
use crate::service::lane_authority::{LaneAuthority, NotAuthority};
use crate::service::table_source::TableSource;
use crate::telemetry;

pub use crate::core::PartitionOffsets;

/// Reads a group's offsets from Kafka (`mq::KafkaLag`). Blocking: called on a blocking thread.
pub trait LagSource: Send + Sync {
    fn read(
        &self,
        group: &str,
        topic: &str,
        partitions: u32,
    ) -> Result<Vec<PartitionOffsets>, String>;
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LanesError {
    #[error("`{value}` is not a valid {what}: use 1-64 characters of a-z, A-Z, 0-9, `-`, `_`, `.`")]
    InvalidName { what: &'static str, value: String },
    #[error("zone `{zone}` is not one of this tidegate's zones ({known})")]
    UnknownZone { zone: String, known: String },
    #[error(transparent)]
    Lane(#[from] LaneError),
    #[error(
        "group `{group}` consumes topic `{topic}` with {partitions} partitions; this member said `{asked_topic}` with {asked_partitions}"
    )]
    GroupMismatch {
        group: String,
        topic: String,
        partitions: u32,
        asked_topic: String,
        asked_partitions: u32,
    },
    #[error("no lane group `{0}`; members create it by registering")]
    GroupNotFound(String),
    #[error(
        "member `{member}` is not registered in group `{group}` (it expired, left, or the coordinator restarted); register again"
    )]
    MemberNotFound { group: String, member: String },
    #[error("at most {0} lane groups may exist at once (lanes.max_groups)")]
    TooManyGroups(usize),
    #[error("group `{group}` already has {max} members (lanes.max_members)")]
    TooManyMembers { group: String, max: usize },
    #[error(
        "caller `{caller}` already created {max} lane groups (lanes.max_groups_per_caller); let one empty out or use another token"
    )]
    CallerGroupsFull { caller: String, max: usize },
    #[error(
        "caller `{caller}` already holds {max} lane members (lanes.max_members_per_caller); leave with some or use another token"
    )]
    CallerMembersFull { caller: String, max: usize },
    #[error("partition {partition} is not one of the topic's {partitions} partitions")]
    BadHolding { partition: u32, partitions: u32 },
    #[error("{}", describe_not_authority(.0))]
    NotAuthority(NotAuthority),
}

fn describe_not_authority(n: &NotAuthority) -> String {
    let holder = match (&n.holder, &n.url) {
        (Some(holder), Some(url)) => format!("replica `{holder}` at {url} is"),
        (Some(holder), None) => format!("replica `{holder}` is"),
        _ => "no replica is known to be".to_owned(),
    };
    format!(
        "this replica (`{}`) is not the lane authority; {holder} the authority (the lane lease in the command log): send lane membership calls there",
        n.myself
    )
}

/// What a heartbeat carries so that a new lane authority can adopt a member it never saw
/// registering (the previous authority died): the member secret proves the identity, these
/// say what it reads.
#[derive(Clone, Debug)]
pub struct Adoption {
    pub owner: String,
    pub zone: String,
    pub topic: String,
    pub partitions: u32,
}

/// A registration: which topic the member reads and where it runs.
#[derive(Clone, Debug)]
pub struct Registration {
    /// The ID to register under, or `None` for a fresh random one (`member_key::new_member_id`).
    /// The HTTP edge always passes a fresh one, so IDs are never reused (ARCHITECTURE.md).
    pub member_id: Option<String>,
    /// Who registers (`service:…`, `operator:NAME`): counted against the per-caller limits.
    pub owner: String,
    pub zone: String,
    pub topic: String,
    pub partitions: u32,
}

/// What a member is told on registration and on every heartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberView {
    pub group: String,
    pub member_id: String,
    pub zone: String,
    pub topic: String,
    pub partitions: u32,
    pub generation: u64,
    /// The partitions it may read now.
    pub assignment: Vec<u32>,
    /// Partitions it will get once their previous owner released them.
    pub pending: Vec<u32>,
    pub heartbeat_interval_ms: u64,
    pub session_timeout_ms: u64,
}

/// One member in [`GroupView`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberStatus {
    pub member_id: String,
    pub zone: String,
    pub assignment: Vec<u32>,
    pub pending: Vec<u32>,
    pub holding: Vec<u32>,
    pub registered_ms: u64,
    pub last_seen_ms: u64,
}

/// How a zone looks to a group's assignment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneStatus {
    pub zone: String,
    pub color: ZoneId,
    /// The zone's lane (`blue`, `green`, ...).
    pub lane: String,
    pub members: usize,
    /// `serving`, `drained` (share 0, backlog left), `drained_empty` or `down`.
    pub state: &'static str,
    pub half: Vec<u32>,
    pub lag: Option<u64>,
}

/// The last lag reading of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LagReading {
    pub at_ms: u64,
    pub partitions: Vec<PartitionOffsets>,
    /// `[blue, green]`.
    /// Lag per zone range, by zone index.
    pub halves: Vec<u64>,
}

/// `GET /v1/lanes/{group}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupView {
    pub group: String,
    pub topic: String,
    pub partitions: u32,
    pub generation: u64,
    pub members: Vec<MemberStatus>,
    pub zones: Vec<ZoneStatus>,
    pub lag: Option<LagReading>,
    pub lag_error: Option<String>,
    pub routing_version: u64,
}

struct Member {
    zone: String,
    owner: String,
    registered_ms: u64,
    last_seen_ms: u64,
    /// What it said it still reads, in its last heartbeat.
    holding: BTreeSet<u32>,
    /// What it was last told it may read. Counts as held until its next heartbeat: it may
    /// already have started reading.
    told: BTreeSet<u32>,
}

struct Group {
    topic: String,
    /// The caller whose registration created the group (per-caller group limit).
    created_by: String,
    lane: LaneConfig,
    members: BTreeMap<String, Member>,
    target: Assignment,
    granted: Assignment,
    generation: u64,
    lag: Option<LagReading>,
    lag_error: Option<String>,
    /// When each colour's share was first seen at 0, while it stays there.
    drained_since: Vec<Option<u64>>,
    flags: Vec<ZoneFlags>,
    /// Partitions some member of this group claimed or was told since this replica became the
    /// lane authority (`core::hold_unvouched`).
    vouched: BTreeSet<u32>,
}

/// The membership service. Cheap to share (`Arc`); every method takes the lock briefly.
pub struct Lanes {
    zones: Zones,
    config: LanesConfig,
    table: Arc<dyn TableSource>,
    lag_source: Option<Arc<dyn LagSource>>,
    groups: Mutex<BTreeMap<String, Group>>,
    /// The clock at the first tick: members registered before a restart have one session
    /// timeout from then to come back, so until then "no groups" does not mean "no backlog".
    first_tick_ms: std::sync::OnceLock<u64>,
    /// Whether this replica may answer membership calls (always, on a single node).
    authority: Arc<LaneAuthority>,
    /// The authority term the groups belong to, and when it began (`None`: never changed hands).
    /// Locked after `groups`, never before.
    term: Mutex<(u64, Option<u64>)>,
    /// The newest member count the lane authority (another replica) sent (`service::gate_view`):
    /// who sent it, when, and what it said.
    peer: Mutex<Option<(String, u64, LaneSummary)>>,
}

/// The lane authority's live members per zone, as it sends them to the other replicas once its
/// term has lasted a session timeout (every member of the previous authority has adopted it or
/// is gone by then).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LaneSummary {
    pub members: BTreeMap<String, usize>,
}

fn check_name(what: &'static str, value: &str) -> Result<(), LanesError> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok { Ok(()) } else { Err(LanesError::InvalidName { what, value: value.to_owned() }) }
}

impl Lanes {
    pub fn new(
        zones: Zones,
        config: LanesConfig,
        table: Arc<dyn TableSource>,
        lag_source: Option<Arc<dyn LagSource>>,
    ) -> Lanes {
        Lanes {
            zones,
            config,
            table,
            lag_source,
            groups: Mutex::new(BTreeMap::new()),
            first_tick_ms: std::sync::OnceLock::new(),
            authority: Arc::new(LaneAuthority::always()),
            term: Mutex::new((0, None)),
            peer: Mutex::new(None),
        }
    }

    /// Answers membership calls only while `authority` says this replica is the lane authority.
    pub fn with_authority(mut self, authority: Arc<LaneAuthority>) -> Lanes {
        self.authority = authority;
        self
    }

    pub fn authority(&self) -> &Arc<LaneAuthority> {
        &self.authority
    }

    /// The groups, if this replica is the lane authority. A new term of authority starts from
    /// no members: the previous authority's members are adopted from their heartbeats.
    fn lock_as_authority(
        &self,
    ) -> Result<std::sync::MutexGuard<'_, BTreeMap<String, Group>>, LanesError> {
        let (term, since) = self.authority.current().map_err(LanesError::NotAuthority)?;
        let mut groups = self.lock();
        let mut seen = self.term.lock().unwrap_or_else(|p| p.into_inner());
        if seen.0 != term {
            groups.clear();
            *seen = (term, since);
        }
        Ok(groups)
    }

    /// Checked again before answering: the window may have closed while this call ran.
    fn still_authority(&self) -> Result<(), LanesError> {
        self.authority.current().map(|_| ()).map_err(LanesError::NotAuthority)
    }

    /// Until when a new authority grants only vouched partitions.
    fn settled_at(&self) -> Option<u64> {
        let term = self.term.lock().unwrap_or_else(|p| p.into_inner());
        term.1.map(|since| since.saturating_add(self.config.session_timeout_ms))
    }

    pub fn config(&self) -> &LanesConfig {
        &self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Group>> {
        // Every mutation below recomputes the assignment from scratch, so a panic in the middle
        // of one cannot leave a state the next call would misread.
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers (or re-registers) a member. A re-registering member holds nothing.
    pub fn register(
        &self,
        group: &str,
        r: Registration,
        now_ms: u64,
    ) -> Result<MemberView, LanesError> {
        let mut groups = self.lock_as_authority()?;
        let view = self.register_locked(&mut groups, group, r, BTreeSet::new(), now_ms)?;
        self.still_authority()?;
        Ok(view)
    }

    fn register_locked(
        &self,
        groups: &mut BTreeMap<String, Group>,
        group: &str,
        r: Registration,
        holding: BTreeSet<u32>,
        now_ms: u64,
    ) -> Result<MemberView, LanesError> {
        check_name("group name", group)?;
        check_name("topic name", &r.topic)?;
        if let Some(id) = &r.member_id {
            check_name("member ID", id)?;
        }
        if self.zones.color_in(&r.zone).is_none() {
            return Err(LanesError::UnknownZone { zone: r.zone, known: self.zones.names() });
        }
        let lane = LaneConfig::for_zones(r.partitions, self.zones.len() as u32)?;
        self.expire_locked(groups, now_ms);
        if !groups.contains_key(group) {
            // The caller's own limit first: a flooding token hits it long before the global one.
            let max = self.config.max_groups_per_caller;
            if groups.values().filter(|g| g.created_by == r.owner).count() >= max {
                return Err(LanesError::CallerGroupsFull { caller: r.owner, max });
            }
            if groups.len() >= self.config.max_groups {
                return Err(LanesError::TooManyGroups(self.config.max_groups));
            }
        }
        let id = match &r.member_id {
            Some(id) => id.clone(),
            None => super::member_key::new_member_id(&r.zone),
        };
        let held = groups
            .iter()
            .flat_map(|(name, g)| g.members.iter().map(move |(m, member)| (name, m, member)))
            .filter(|(name, m, member)| member.owner == r.owner && !(*name == group && **m == id))
            .count();
        if held >= self.config.max_members_per_caller {
            let max = self.config.max_members_per_caller;
            return Err(LanesError::CallerMembersFull { caller: r.owner, max });
        }
        let g = groups.entry(group.to_owned()).or_insert_with(|| Group {
            created_by: r.owner.clone(),
            topic: r.topic.clone(),
            lane,
            members: BTreeMap::new(),
            target: Assignment::new(),
            granted: Assignment::new(),
            generation: 0,
            lag: None,
            lag_error: None,
            drained_since: vec![None; self.zones.len()],
            flags: vec![ZoneFlags::default(); self.zones.len()],
            vouched: BTreeSet::new(),
        });
        if g.topic != r.topic || g.lane != lane {
            return Err(LanesError::GroupMismatch {
                group: group.to_owned(),
                topic: g.topic.clone(),
                partitions: g.lane.partitions(),
                asked_topic: r.topic,
                asked_partitions: r.partitions,
            });
        }
        if !g.members.contains_key(&id) && g.members.len() >= self.config.max_members {
            return Err(LanesError::TooManyMembers {
                group: group.to_owned(),
                max: self.config.max_members,
            });
        }
        if let Some(&partition) = holding.iter().find(|p| **p >= g.lane.partitions()) {
            return Err(LanesError::BadHolding { partition, partitions: g.lane.partitions() });
        }
        g.vouched.extend(holding.iter().copied());
        g.members.insert(
            id.clone(),
            Member {
                owner: r.owner,
                zone: r.zone,
                registered_ms: now_ms,
                last_seen_ms: now_ms,
                holding,
                told: BTreeSet::new(),
            },
        );
        self.recompute(group, g, now_ms);
        Ok(self.member_view(group, g, &id))
    }

    /// A heartbeat: the member is alive and still holds `holding`. The answer is what it may
    /// read now.
    ///
    /// On a replica of a shared log, a member this replica does not know is adopted when the
    /// heartbeat carries `adopt` (the caller proved the member's identity with its secret): it
    /// joins with the partitions it holds, instead of being told to stop reading and register
    /// again. This is how a lane authority takes over the members of one that died. A single
    /// node answers `member_not_found` as always.
    pub fn heartbeat(
        &self,
        group: &str,
        member: &str,
        holding: BTreeSet<u32>,
        adopt: Option<Adoption>,
        now_ms: u64,
    ) -> Result<MemberView, LanesError> {
        let mut groups = self.lock_as_authority()?;
        self.expire_locked(&mut groups, now_ms);
        let not_found =
            || LanesError::MemberNotFound { group: group.to_owned(), member: member.to_owned() };
        let known = groups.get(group).is_some_and(|g| g.members.contains_key(member));
        if !known {
            // Only a leased authority adopts: it holds unclaimed partitions back for a session
            // after taking over. A single node keeps "restart means register again".
            let a = adopt.filter(|_| self.authority.is_leased()).ok_or_else(not_found)?;
            let registration = Registration {
                member_id: Some(member.to_owned()),
                owner: a.owner,
                zone: a.zone,
                topic: a.topic,
                partitions: a.partitions,
            };
            let view = self.register_locked(&mut groups, group, registration, holding, now_ms)?;
            self.still_authority()?;
            return Ok(view);
        }
        let g = groups.get_mut(group).ok_or_else(not_found)?;
        if let Some(&partition) = holding.iter().find(|p| **p >= g.lane.partitions()) {
            return Err(LanesError::BadHolding { partition, partitions: g.lane.partitions() });
        }
        g.vouched.extend(holding.iter().copied());
        let m = g.members.get_mut(member).ok_or_else(not_found)?;
        m.last_seen_ms = now_ms;
        m.holding = holding;
        self.recompute(group, g, now_ms);
        let view = self.member_view(group, g, member);
        self.still_authority()?;
        Ok(view)
    }

    /// A member leaves after releasing everything: its partitions move on at once.
    pub fn leave(&self, group: &str, member: &str, now_ms: u64) -> Result<(), LanesError> {
        let mut groups = self.lock_as_authority()?;
        let not_found =
            || LanesError::MemberNotFound { group: group.to_owned(), member: member.to_owned() };
        let g = groups.get_mut(group).ok_or_else(not_found)?;
        g.members.remove(member).ok_or_else(not_found)?;
        self.recompute(group, g, now_ms);
        self.expire_locked(&mut groups, now_ms);
        Ok(())
    }

    /// Expires members past their session timeout and re-evaluates every group (the routing
    /// table may have moved a zone to or from 0). Called by [`run`] on every tick.
    pub fn tick(&self, now_ms: u64) {
        self.first_tick_ms.get_or_init(|| now_ms);
        let Ok(mut groups) = self.lock_as_authority() else {
            // Not the authority: what this replica knew is stale, and is forgotten.
            self.lock().clear();
            return;
        };
        self.expire_locked(&mut groups, now_ms);
        for (name, g) in groups.iter_mut() {
            self.recompute(name, g, now_ms);
        }
    }

    fn expire_locked(&self, groups: &mut BTreeMap<String, Group>, now_ms: u64) {
        let timeout = self.config.session_timeout_ms;
        for (name, g) in groups.iter_mut() {
            let before = g.members.len();
            g.members.retain(|_, m| now_ms.saturating_sub(m.last_seen_ms) <= timeout);
            if g.members.len() != before {
                self.recompute(name, g, now_ms);
            }
        }
        // A group without members is forgotten, so names cannot pile up: its lag gauges stay at
        // their last value until the group comes back.
        groups.retain(|_, g| !g.members.is_empty());
    }

    /// Recomputes the target and the grant; bumps the generation when either changed.
    fn recompute(&self, name: &str, g: &mut Group, now_ms: u64) {
        let Some(table) = self.table.current_table() else {
            return; // no table yet: keep the current target until one arrives
        };
        let mut flags = vec![ZoneFlags::default(); self.zones.len()];
        g.drained_since.resize(self.zones.len(), None);
        for color in self.zones.ids() {
            let zone = self.zones.zone_of(color);
            let units = if table.zones().contains(color) { table.units_of(color) } else { 0 };
            let since = &mut g.drained_since[color.index()];
            if units == 0 {
                since.get_or_insert(now_ms);
            } else {
                *since = None;
            }
            // Only a lag reading taken after the share reached 0 can say the backlog is done:
            // an older zero predates the last messages produced for this colour.
            let lag_zero = match (&g.lag, *since) {
                (Some(lag), Some(since)) => {
                    lag.at_ms > since && lag.halves.get(color.index()).copied().unwrap_or(0) == 0
                }
                _ => false,
            };
            flags[color.index()] = ZoneFlags {
                drained_empty: units == 0 && lag_zero,
                down: !g.members.values().any(|m| m.zone == zone),
            };
        }
        let members: Vec<LaneMember> = g
            .members
            .iter()
            .map(|(id, m)| LaneMember { id: id.clone(), zone: m.zone.clone(), alive: true })
            .collect();
        let target = assign(&AssignmentInput {
            lane: g.lane,
            zones: &self.zones,
            members: &members,
            flags: flags.clone(),
        });
        let claims: BTreeMap<String, BTreeSet<u32>> = g
            .members
            .iter()
            .map(|(id, m)| (id.clone(), m.holding.union(&m.told).copied().collect()))
            .collect();
        let granted =
            hold_unvouched(grant(&target, &claims), &g.vouched, now_ms, self.settled_at());
        if target != g.target || granted != g.granted {
            g.generation += 1;
            g.target = target;
            g.granted = granted;
        }
        g.flags = flags;
        self.publish(name, g);
    }

    fn member_view(&self, group: &str, g: &mut Group, id: &str) -> MemberView {
        let granted = g.granted.get(id).cloned().unwrap_or_default();
        let target = g.target.get(id).cloned().unwrap_or_default();
        g.vouched.extend(granted.iter().copied());
        let member = g.members.get_mut(id).expect("the member was just found or inserted");
        member.told = granted.clone();
        MemberView {
            group: group.to_owned(),
            member_id: id.to_owned(),
            zone: member.zone.clone(),
            topic: g.topic.clone(),
            partitions: g.lane.partitions(),
            generation: g.generation,
            assignment: granted.iter().copied().collect(),
            pending: target.difference(&granted).copied().collect(),
            heartbeat_interval_ms: self.config.heartbeat_interval_ms,
            session_timeout_ms: self.config.session_timeout_ms,
        }
    }

    /// The group as `GET /v1/lanes/{group}` shows it.
    pub fn view(&self, group: &str, now_ms: u64) -> Result<GroupView, LanesError> {
        let mut groups = self.lock_as_authority()?;
        self.expire_locked(&mut groups, now_ms);
        let g = groups.get(group).ok_or_else(|| LanesError::GroupNotFound(group.to_owned()))?;
        Ok(self.group_view(group, g))
    }

    /// The live members per zone as the authority counts them, once its term has settled (a
    /// session timeout after it began: until then members of the previous authority may not
    /// have adopted this one yet, and "no members" would be wrong). `None` elsewhere.
    pub fn summary(&self, now_ms: u64) -> Option<LaneSummary> {
        let (_, since) = self.authority.current().ok()?;
        if since.is_some_and(|s| now_ms < s.saturating_add(self.config.session_timeout_ms)) {
            return None;
        }
        let mut members: BTreeMap<String, usize> = BTreeMap::new();
        for g in self.views(now_ms) {
            for m in g.members {
                *members.entry(m.zone).or_default() += 1;
            }
        }
        Some(LaneSummary { members })
    }

    /// Takes in the member count the lane authority sent at `at_ms`.
    pub fn receive_peer(&self, replica: &str, at_ms: u64, summary: LaneSummary) {
        let mut peer = self.peer.lock().unwrap_or_else(|p| p.into_inner());
        if peer.as_ref().is_none_or(|(_, at, _)| *at <= at_ms) {
            *peer = Some((replica.to_owned(), at_ms, summary));
        }
    }

    /// Live lane members per zone as far as this replica can tell, or `None` when it cannot:
    /// its own count while it is the authority and its term has settled, else the authority's
    /// count heard within `gate_view::PEER_FRESH_MS`. A replica that just lost or took the lease
    /// cannot tell, so it never reads "every consumer gone" from an empty registry.
    pub fn members_by_zone(&self, now_ms: u64) -> Option<BTreeMap<String, usize>> {
        if self.authority.current().is_ok() {
            return self.summary(now_ms).map(|s| s.members);
        }
        let peer = self.peer.lock().unwrap_or_else(|p| p.into_inner());
        let (_, at, summary) = peer.as_ref()?;
        (now_ms.saturating_sub(*at) <= crate::service::peer_reports::PEER_FRESH_MS)
            .then(|| summary.members.clone())
    }

    /// Every group, by name (none on a replica that is not the lane authority).
    pub fn views(&self, now_ms: u64) -> Vec<GroupView> {
        let Ok(mut groups) = self.lock_as_authority() else { return Vec::new() };
        self.expire_locked(&mut groups, now_ms);
        groups.iter().map(|(name, g)| self.group_view(name, g)).collect()
    }

    fn group_view(&self, name: &str, g: &Group) -> GroupView {
        let members = g
            .members
            .iter()
            .map(|(id, m)| {
                let granted = g.granted.get(id).cloned().unwrap_or_default();
                let target = g.target.get(id).cloned().unwrap_or_default();
                MemberStatus {
                    member_id: id.clone(),
                    zone: m.zone.clone(),
                    assignment: granted.iter().copied().collect(),
                    pending: target.difference(&granted).copied().collect(),
                    holding: m.holding.iter().copied().collect(),
                    registered_ms: m.registered_ms,
                    last_seen_ms: m.last_seen_ms,
                }
            })
            .collect();
        let zones = self
            .zones
            .ids()
            .map(|color| {
                let zone = self.zones.zone_of(color).to_owned();
                let f = g.flags.get(color.index()).copied().unwrap_or_default();
                let state = if f.down {
                    "down"
                } else if f.drained_empty {
                    "drained_empty"
                } else if g.drained_since.get(color.index()).is_some_and(Option::is_some) {
                    "drained"
                } else {
                    "serving"
                };
                ZoneStatus {
                    members: g.members.values().filter(|m| m.zone == zone).count(),
                    zone,
                    color,
                    lane: self.zones.lane(color).to_owned(),
                    state,
                    half: g.lane.half(color).collect(),
                    lag: g.lag.as_ref().and_then(|l| l.halves.get(color.index()).copied()),
                }
            })
            .collect();
        GroupView {
            group: name.to_owned(),
            topic: g.topic.clone(),
            partitions: g.lane.partitions(),
            generation: g.generation,
            members,
            zones,
            lag: g.lag.clone(),
            lag_error: g.lag_error.clone(),
            routing_version: self.table.current_table().map_or(0, |t| t.version()),
        }
    }

    /// The current lag of `color`'s half for one group: the sum over the half's partitions of
    /// the high watermark minus the group's committed offset. `None` while unknown (no reading
    /// yet, Kafka not configured, or the last read failed).
    pub fn half_lag(&self, group: &str, color: ZoneId) -> Option<u64> {
        let groups = self.lock();
        let g = groups.get(group)?;
        if g.lag_error.is_some() {
            return None;
        }
        g.lag.as_ref().and_then(|l| l.halves.get(color.index()).copied())
    }

    /// `color`'s half lag summed over every group; `None` if any group's lag is unknown.
    ///
    /// Only a reading whose read *started* after `zero_since_ms` (when the caller saw the
    /// colour's share reach 0; pass 0 for "any reading") counts, and after the moment this
    /// service saw the share at 0 (the same rule the assignment uses): an older zero predates
    /// the last messages produced for the colour, so a drain must not be completed on it.
    ///
    /// With no groups it is `Some(0)` only once lag is not read at all, or one session timeout
    /// has passed since this service started: after a restart the registry is empty until the
    /// consumers re-register, and that emptiness says nothing about their backlog.
    ///
    /// Only the lane authority knows the groups: on any other replica it is `None`, so only the
    /// authority's drain runner completes a drain on a lag reading. A new term of authority
    /// counts as a start (its registry is empty until the members are adopted).
    pub fn total_half_lag(&self, color: ZoneId, zero_since_ms: u64, now_ms: u64) -> Option<u64> {
        let groups = self.lock_as_authority().ok()?;
        if groups.is_empty() && self.lag_source.is_some() {
            let since = self.term.lock().unwrap_or_else(|p| p.into_inner()).1.unwrap_or(0);
            let started = (*self.first_tick_ms.get()?).max(since);
            if now_ms < started.saturating_add(self.config.session_timeout_ms) {
                return None;
            }
        }
        groups.values().try_fold(0u64, |sum, g| {
            if g.lag_error.is_some() {
                return None;
            }
            let lag = g.lag.as_ref()?;
            let since = g
                .drained_since
                .get(color.index())
                .copied()
                .flatten()
                .unwrap_or(0)
                .max(zero_since_ms);
            if since > 0 && lag.at_ms <= since {
                return None;
            }
            Some(sum.saturating_add(lag.halves.get(color.index()).copied().unwrap_or(0)))
        })
    }

    /// Groups whose lag should be read: `(group, topic, partitions)`.
    pub fn lag_targets(&self) -> Vec<(String, String, u32)> {
        let groups = self.lock();
        groups.iter().map(|(n, g)| (n.clone(), g.topic.clone(), g.lane.partitions())).collect()
    }

    /// Stores a lag reading (or its failure) and re-evaluates the group's assignment. `now_ms`
    /// is when the read *started*: the offsets may be that old.
    pub fn record_lag(
        &self,
        group: &str,
        reading: Result<Vec<PartitionOffsets>, String>,
        now_ms: u64,
    ) {
        let mut groups = self.lock();
        let Some(g) = groups.get_mut(group) else { return };
        match reading {
            Ok(partitions) => {
                telemetry::publish_lane_offsets(group, &g.topic, g.lane, &self.zones, &partitions);
                let lags = partitions
                    .iter()
                    .map(|p| (p.partition, partition_lag(p.low, p.high, p.committed)));
                let halves = half_lags(g.lane, lags);
                g.lag = Some(LagReading { at_ms: now_ms, partitions, halves });
                g.lag_error = None;
            }
            Err(e) => {
                telemetry::count_lane_lag_error(group);
                g.lag_error = Some(e);
            }
        }
        self.recompute(group, g, now_ms);
    }

    /// Whether lag can be read at all (`lanes.kafka_bootstrap` is set).
    pub fn reads_lag(&self) -> bool {
        self.lag_source.is_some()
    }

    fn publish(&self, name: &str, g: &Group) {
        let mut members = vec![0usize; self.zones.len()];
        let mut assigned = vec![0usize; self.zones.len()];
        for (id, m) in &g.members {
            if let Some(color) = self.zones.color_in(&m.zone) {
                members[color.index()] += 1;
                assigned[color.index()] += g.granted.get(id).map_or(0, BTreeSet::len);
            }
        }
        for color in self.zones.ids() {
            let zone = self.zones.zone_of(color);
            let lag = g.lag.as_ref().and_then(|l| l.halves.get(color.index()).copied());
            telemetry::publish_lane(
                name,
                &g.topic,
                zone,
                self.zones.lane(color),
                members[color.index()],
                assigned[color.index()],
                lag,
            );
        }
        telemetry::publish_lane_generation(name, g.generation);
    }
}

/// Runs until `shutdown` completes: expires members and re-evaluates assignments every tick,
/// and reads each group's lag every `lanes.lag_interval` (on a blocking thread).
pub async fn run(lanes: Arc<Lanes>, now_ms: fn() -> u64, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    let cfg = lanes.config().clone();
    // Expiry is checked a few times per session timeout so a dead zone is noticed promptly.
    let tick = Duration::from_millis(
        (cfg.session_timeout_ms / 5).min(cfg.lag_interval_ms).clamp(10, 1000),
    );
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next_lag_ms = 0u64;
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = ticker.tick() => {}
        }
        let now = now_ms();
        lanes.tick(now);
        let Some(source) = lanes.lag_source.clone() else { continue };
        if now < next_lag_ms {
            continue;
        }
        next_lag_ms = now + cfg.lag_interval_ms;
        for (group, topic, partitions) in lanes.lag_targets() {
            let source = Arc::clone(&source);
            let g = group.clone();
            // Stamped when the read starts, not when it returns: a commit seen as "lag 0" may
            // be from any moment during the read.
            let started = now_ms();
            let read = tokio::task::spawn_blocking(move || source.read(&g, &topic, partitions))
                .await
                .unwrap_or_else(|e| Err(format!("lag reader failed: {e}")));
            lanes.record_lag(&group, read, started);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{RoutingTable, UnitMode, UnitScheme};
    use crate::service::lane_authority::Claimant;
    use crate::store::Lease;
    use std::time::Instant;

    fn lanes_always() -> Lanes {
        lanes(&Arc::new(LaneAuthority::always()))
    }

    #[test]
    fn a_replica_that_is_not_the_settled_authority_cannot_say_every_consumer_is_gone() {
        let authority = Arc::new(LaneAuthority::leased(Claimant {
            node_id: "r1".into(),
            url: "http://r1".into(),
            term_ms: 400,
        }));
        let l = lanes(&authority);
        // Not the authority, nothing heard from it: cannot tell (not "no members").
        assert_eq!(l.members_by_zone(10_000), None);
        let mut members = BTreeMap::new();
        members.insert("az-b".to_owned(), 2);
        l.receive_peer("r2", 10_000, LaneSummary { members: members.clone() });
        assert_eq!(l.members_by_zone(10_100), Some(members));
        assert_eq!(
            l.members_by_zone(10_000 + crate::service::peer_reports::PEER_FRESH_MS + 1),
            None
        );
        assert_eq!(l.summary(10_000), None, "only the authority reports");
    }

    fn lanes(authority: &Arc<LaneAuthority>) -> Lanes {
        let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
        let table =
            RoutingTable::from_parts(1, scheme, 50, BTreeMap::new(), Zones::default()).unwrap();
        let config = LanesConfig {
            session_timeout_ms: 1_000,
            heartbeat_interval_ms: 200,
            lag_interval_ms: 200,
            kafka_bootstrap: None,
            max_groups: 4,
            max_members: 8,
            member_key: None,
            previous_member_key: None,
            max_groups_per_caller: 4,
            max_members_per_caller: 100,
            lease_ms: 400,
        };
        let source = Arc::new(arc_swap::ArcSwap::from_pointee(table));
        Lanes::new(Zones::default(), config, source, None).with_authority(Arc::clone(authority))
    }

    fn lease(holder: &str) -> Option<Lease> {
        Some(Lease {
            holder: holder.into(),
            url: Some(format!("http://{holder}")),
            at_ms: 0,
            until_ms: 0,
        })
    }

    fn adopt(zone: &str) -> Option<Adoption> {
        Some(Adoption {
            owner: "t".into(),
            zone: zone.into(),
            topic: "orders".into(),
            partitions: 8,
        })
    }

    fn set(items: &[u32]) -> BTreeSet<u32> {
        items.iter().copied().collect()
    }

    #[test]
    fn a_new_authority_adopts_claims_at_once_and_hands_out_the_rest_one_session_later() {
        // A term long enough not to lapse while the test runs.
        let authority = Arc::new(LaneAuthority::leased(Claimant {
            node_id: "r2".into(),
            url: "http://r2".into(),
            term_ms: 600_000,
        }));
        let lanes = lanes(&authority);
        // A single node never adopts: after its restart, members register again.
        let single = lanes_always();
        let err = single.heartbeat("g", "b1", set(&[0]), adopt("az-b"), 0).unwrap_err();
        assert!(matches!(err, LanesError::MemberNotFound { .. }), "{err:?}");
        // Before it holds the lease: every membership call names the holder.
        authority.record(false, lease("r1"), Instant::now(), 500);
        let err = lanes.heartbeat("g", "b1", set(&[0, 1]), adopt("az-b"), 900).unwrap_err();
        let LanesError::NotAuthority(n) = &err else { panic!("{err:?}") };
        assert_eq!((n.holder.as_deref(), n.url.as_deref()), (Some("r1"), Some("http://r1")));
        assert!(err.to_string().contains("http://r1"), "{err}");
        assert_eq!(lanes.total_half_lag(ZoneId::BLUE, 0, 900), None);
        // It takes over at 1 000 (session 1 000 ms: unclaimed partitions wait until 2 000).
        assert_eq!(authority.record(true, lease("r2"), Instant::now(), 1_000), Some(true));
        // Without what it reads, an unknown member is still told to register again.
        let err = lanes.heartbeat("g", "b1", set(&[0, 1]), None, 1_050).unwrap_err();
        assert!(matches!(err, LanesError::MemberNotFound { .. }), "{err:?}");
        // A claim outside the topic is refused as for a known member.
        let err = lanes.heartbeat("g", "x", set(&[8]), adopt("az-a"), 1_060).unwrap_err();
        assert!(matches!(err, LanesError::BadHolding { .. }), "{err:?}");
        let b1 = lanes.heartbeat("g", "b1", set(&[0, 1]), adopt("az-b"), 1_100).unwrap();
        assert_eq!(b1.assignment, vec![0, 1], "what it claimed, nothing nobody vouched for");
        let a1 = lanes.register("g", reg("a1", "az-a"), 1_200).unwrap();
        assert_eq!(a1.assignment, Vec::<u32>::new(), "green is unclaimed: held back");
        assert_eq!(a1.pending, vec![4, 5, 6, 7]);
        let a1 = lanes.heartbeat("g", "a1", set(&[]), None, 1_999).unwrap();
        assert_eq!(a1.assignment, Vec::<u32>::new());
        let a1 = lanes.heartbeat("g", "a1", set(&[]), None, 2_000).unwrap();
        assert_eq!(a1.assignment, vec![4, 5, 6, 7], "one session after the takeover");
        let b1 = lanes.heartbeat("g", "b1", set(&[0, 1]), None, 2_010).unwrap();
        assert_eq!(b1.assignment, vec![0, 1, 2, 3]);
        // It loses the lease: it answers as a follower and forgets the groups.
        assert_eq!(authority.record(false, lease("r3"), Instant::now(), 2_100), Some(false));
        assert!(matches!(
            lanes.register("g", reg("a2", "az-a"), 2_200),
            Err(LanesError::NotAuthority(_))
        ));
        lanes.tick(2_200);
        assert!(lanes.lag_targets().is_empty());
        assert!(lanes.views(2_200).is_empty());
        // Taking it back later is a new term: nothing from before survives.
        assert_eq!(authority.record(true, lease("r2"), Instant::now(), 5_000), Some(true));
        let err = lanes.heartbeat("g", "a1", set(&[4]), None, 5_100).unwrap_err();
        assert!(matches!(err, LanesError::MemberNotFound { .. }), "{err:?}");
    }

    fn reg(id: &str, zone: &str) -> Registration {
        Registration {
            member_id: Some(id.into()),
            owner: "t".into(),
            zone: zone.into(),
            topic: "orders".into(),
            partitions: 8,
        }
    }
}
