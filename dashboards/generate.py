#!/usr/bin/env python3
"""Generates tidegate's Grafana dashboards with Grafana's own SDK (the committed *.json files are
its output).

    bash scripts/dashboards.sh          # fail if the JSON files are out of date (scripts/test.sh)
    bash scripts/dashboards.sh write    # rewrite them

scripts/dashboards.sh installs the SDK (grafana-foundation-sdk, pinned with its hash in
dashboards/requirements.txt) into a virtualenv and runs this file there with or without
`--check`.

Why the SDK: its builders and models are generated from Grafana's own dashboard schema (the
11.6 build: schemaVersion 41), so a panel, a query or a variable can only carry the fields and
types that schema has. Why a generator at all: every panel must carry a title, a description, a
unit and a datasource, use `$__rate_interval`, and filter by the `zone` variable where the metric
has zones; writing that by hand in four dashboards invites drift. The habits follow the
monitoring-mixins: one `datasource` variable, a multi-select `zone` variable, recording rules
shared with the alerts, ratios computed as sums divided.

The output is the SDK's JSON encoding with sorted keys and a two-space indent, so `--check`
compares byte for byte. tests/observability_dashboards.rs checks its structure and
tests/observability_live.rs runs every panel's query against a real Prometheus.
"""
import os
import re
import sys
from importlib import metadata

try:
    from grafana_foundation_sdk.builders import common as common_b
    from grafana_foundation_sdk.builders import dashboard as dash
    from grafana_foundation_sdk.builders import gauge, prometheus, stat, statetimeline, timeseries
    from grafana_foundation_sdk.cog import builder as cogbuilder
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import common
    from grafana_foundation_sdk.models import dashboard as model
except ImportError as e:
    sys.exit(f"dashboards/generate.py needs grafana-foundation-sdk ({e}); run: bash scripts/dashboards.sh")

HERE = os.path.dirname(os.path.abspath(__file__))


def pinned_sdk_version():
    """The version dashboards/requirements.txt pins: another build could write other JSON."""
    with open(os.path.join(HERE, "requirements.txt"), encoding="utf-8") as f:
        found = re.search(r"^grafana-foundation-sdk==(\S+)", f.read(), re.MULTILINE)
    if not found:
        sys.exit("dashboards/requirements.txt pins no grafana-foundation-sdk version")
    return found.group(1)


def ds():
    """Every panel, query, variable and annotation reads the `datasource` variable."""
    return model.DataSourceRef(type_val="prometheus", uid="${datasource}")


class Extended(cogbuilder.Builder):
    """A model built by an SDK builder, plus fields that the schema's type for it lacks.

    Used only where Grafana itself writes such a field and the SDK has no builder method or
    model attribute for it: a query variable's `definition` (the text Grafana shows for the
    variable's query) and a Prometheus annotation's own fields (`step`, `titleFormat`,
    `textFormat`, `useValueForTime`), which the schema leaves to the data source. The SDK's
    JSON encoder calls `to_json`, so the model's own fields come out as the SDK writes them.
    """

    def __init__(self, builder, **fields):
        self.model = builder.build()
        self.fields = fields

    def build(self):
        return self

    def to_json(self):
        return {**self.model.to_json(), **self.fields}


def label_variable(name, label, metric, description):
    """A multi-select variable over one label's values, with All meaning any value."""
    query = f"label_values({metric}, {name})"
    variable = (
        dash.QueryVariable(name)
        .label(label)
        .description(description)
        .datasource(ds())
        .query({"query": query, "refId": name})
        .multi(True)
        .include_all(True)
        .all_value(".+")
        .current(model.VariableOption(selected=True, text=["All"], value=["$__all"]))
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
        .hide(model.VariableHide.DONT_HIDE)
    )
    return Extended(variable, definition=query)


def variables(with_zone=True, with_group=False):
    datasource = (
        dash.DatasourceVariable("datasource")
        .label("Data source")
        .description("The Prometheus that scrapes tidegate (and has its recording rules loaded).")
        .type("prometheus")
        .hide(model.VariableHide.DONT_HIDE)
    )
    # The builder has no `refresh` for a data source variable; Grafana writes 1 (on load).
    datasource.build().refresh = model.VariableRefresh.ON_DASHBOARD_LOAD
    out = [datasource]
    if with_zone:
        out.append(label_variable(
            "zone", "Zone", "tidegate_zone_share_ratio",
            "Availability zones to show (from the share gauge, so every configured zone appears)."))
    if with_group:
        out.append(label_variable("group", "Lane group", "tidegate_lane_members", "Consumer groups of the MQ lanes."))
    return out


PANELS = {"timeseries": timeseries.Panel, "stat": stat.Panel, "gauge": gauge.Panel,
          "state-timeline": statetimeline.Panel}


class Board:
    """One dashboard: the SDK's Dashboard builder, with panels laid out in lines of 24 columns."""

    def __init__(self, uid, title, description, with_zone=True, with_group=False):
        self.builder = (
            dash.Dashboard(title)
            .uid(uid)
            .description(description)
            .tags(["tidegate"])
            .version(1)
            .editable()
            .tooltip(model.DashboardCursorSync.CROSSHAIR)
            .time("now-1h", "now")
            .refresh("10s")
            .timezone("")
            .fiscal_year_start_month(0)
            .live_now(False)
            .week_start("")
            .links([])
            .variables(variables(with_zone, with_group))
            .annotation(
                dash.AnnotationQuery()
                .name("Annotations & Alerts")
                .datasource(model.DataSourceRef(type_val="grafana", uid="-- Grafana --"))
                .enable(True)
                .hide(True)
                .icon_color("rgba(0, 211, 255, 1)")
                .type("dashboard")
                .built_in(1)
            )
        )
        self.next_id = 1
        self.x = 0  # where the next panel goes in the current line

    def _id(self):
        self.next_id += 1
        return self.next_id - 1

    def row(self, title):
        self.x = 0
        self.builder.with_row(dash.Row(title).id(self._id()))

    def panel(self, kind, title, description, unit, targets, width=12, height=8, **options):
        # The SDK places a panel after the previous one and starts a new line once a line holds 24
        # columns (or at a row); it never moves a panel that does not fit, so none may overflow.
        if self.x + width > 24:
            sys.exit(f"{title!r}: {width} columns do not fit after {self.x} in a line of 24")
        self.x = (self.x + width) % 24
        panel = (
            PANELS[kind]()
            .id(self._id())
            .title(title)
            .description(description)
            .datasource(ds())
            .height(height)
            .span(width)
            .unit(unit)
            .targets([
                prometheus.Dataquery()
                .ref_id(chr(ord("A") + i))
                .datasource(ds())
                .expr(expr)
                .legend_format(legend)
                .range()
                for i, (expr, legend) in enumerate(targets)
            ])
        )
        if "min" in options:
            panel.min(options["min"])
        if "max" in options:
            panel.max(options["max"])
        if "thresholds" in options:
            panel.thresholds(
                dash.ThresholdsConfig()
                .mode(model.ThresholdsMode.ABSOLUTE)
                .steps([model.Threshold(value=value, color=color) for value, color in options["thresholds"]])
            )
        if options.get("legend"):
            # A legend set explicitly; the tooltip too, since the SDK's options model would
            # otherwise sort it ascending where Grafana's panel default does not sort.
            panel.legend(
                common_b.VizLegendOptions()
                .display_mode(common.LegendDisplayMode.LIST)
                .placement(common.LegendPlacement.BOTTOM)
                .show_legend(True)
            ).tooltip(common_b.VizTooltipOptions().mode(common.TooltipDisplayMode.SINGLE).sort(common.SortOrder.NONE))
        self.builder.with_panel(panel)

    def annotation(self, name, expr, title, color):
        query = (
            dash.AnnotationQuery()
            .name(name)
            .datasource(ds())
            .enable(True)
            .icon_color(color)
            .expr(expr)
        )
        self.builder.annotation(Extended(query, step="15s", titleFormat=title, textFormat="", useValueForTime=False))

    def json(self):
        return self.builder.build()


ZONE = 'zone=~"$zone"'
# Error-ratio thresholds: (value, colour) from the base step up.
PERCENT_THRESHOLDS = [(None, "green"), (0.02, "orange"), (0.05, "red")]


def zone_health():
    b = Board("tidegate-zone-health", "tidegate / Zone health",
              "Per-zone errors and traffic (RED), the share of users per zone, and drains with their guard.")
    b.annotation("Dial changes", 'sum(increase(tidegate_changes_total{action="dial"}[1m])) > 0',
                 "Dial moved", "rgba(255, 152, 48, 1)")
    b.annotation("Drain steps", 'sum(increase(tidegate_changes_total{action="drain_step"}[1m])) > 0',
                 "Drain step", "rgba(138, 184, 255, 1)")
    b.row("Errors and traffic (reported outcomes)")
    b.panel("timeseries", "Error ratio by zone",
            "Failed / all requests reported through POST /v1/outcomes over the last minute "
            "(recording rule zone:tidegate_zone_error:ratio_rate1m, the same the TidegateZoneErrorRatioHigh alert uses).",
            "percentunit", [(f"zone:tidegate_zone_error:ratio_rate1m{{{ZONE}}}", "{{zone}}")],
            min=0, thresholds=PERCENT_THRESHOLDS)
    b.panel("timeseries", "Requests by zone",
            "Requests per second reported per zone (ok and error).",
            "reqps", [(f"sum by (zone) (rate(tidegate_zone_requests_total{{{ZONE}}}[$__rate_interval]))", "{{zone}}")], min=0)
    b.panel("timeseries", "Errors by zone",
            "Failed requests per second reported per zone.",
            "reqps", [(f"sum by (zone) (rate(tidegate_zone_errors_total{{{ZONE}}}[$__rate_interval]))", "{{zone}}")], min=0)
    b.panel("timeseries", "Requests by zone and colour",
            "Requests per second by the zone that served them and the colour they were tagged with; "
            "a colour appearing in the wrong zone means misrouted traffic.",
            "reqps", [(f"sum by (zone, color) (rate(tidegate_zone_requests_total{{{ZONE}}}[$__rate_interval]))", "{{zone}} / {{color}}")], min=0)
    b.row("Share of users")
    b.panel("timeseries", "Share of users per zone",
            "Fraction of users routed to each zone by the routing table; dial moves and drain steps are annotated.",
            "percentunit", [(f"max by (zone, color) (tidegate_zone_share_ratio{{{ZONE}}})", "{{zone}} ({{color}})")],
            min=0, max=1, legend=True)
    b.panel("stat", "Blue share",
            "Current share of units routed to blue.",
            "percentunit", [("max(tidegate_routing_blue_ratio)", "blue")], width=6, min=0, max=1)
    b.panel("stat", "Routing version",
            "Version of the routing table the coordinator serves; every change increments it.",
            "none", [("max(tidegate_routing_version)", "version")], width=6)
    b.row("Drains and guard")
    b.panel("gauge", "Drain progress",
            "Steps the latest drain has taken out of the steps it needs (0-100%).",
            "percentunit", [("max(tidegate_drain_steps_done) / clamp_min(max(tidegate_drain_steps_planned), 1)", "progress")],
            width=6, min=0, max=1)
    b.panel("state-timeline", "Drain state",
            "State of the latest drain over time (1 = current state).",
            "none", [("max by (state) (tidegate_drain_state)", "{{state}}")], width=9)
    b.panel("timeseries", "Drain pauses by cause",
            "1 while the latest drain is paused, by who paused it: the guard, a step that did not converge, or an operator.",
            "none", [("max by (cause) (tidegate_drain_paused)", "{{cause}}")], width=9, min=0, max=1)
    b.panel("timeseries", "Guard reading: error ratio",
            "The error ratio each zone's health source reports over the guard window: exactly what the drain guard compares with max_error_rate.",
            "percentunit", [(f"max by (zone) (tidegate_zone_error_ratio{{{ZONE}}})", "{{zone}}")], min=0, thresholds=PERCENT_THRESHOLDS)
    b.panel("timeseries", "Guard reading: requests in window",
            "Requests each zone saw in the guard window (the guard only judges zones with at least min_requests).",
            "short", [(f"max by (zone) (tidegate_zone_window_requests{{{ZONE}}})", "{{zone}}")], min=0)
    b.panel("timeseries", "Guard breaches",
            "Guard checks that found a zone above its error-rate limit, per minute.",
            "short", [("sum by (zone) (increase(tidegate_drain_guard_breaches_total[$__rate_interval]))", "{{zone}}")], min=0)
    b.panel("timeseries", "Frozen units",
            "Units whose writes a loss-less drain step freezes, by domain: writes of their users get 503 frozen until every subscriber applied the switch (0 between moves).",
            "short", [("max by (domain) (tidegate_frozen_units)", "{{domain}}")], width=6, min=0)
    b.panel("timeseries", "Misrouted writes",
            "Writes the services' write checks refused or forwarded because another zone owns the user, per second, by owner lane (tidegate_client_misrouted_total, from the services' own /metrics).",
            "short", [("sum by (color) (rate(tidegate_client_misrouted_total[$__rate_interval]))", "{{color}}")], width=6, min=0)
    b.panel("timeseries", "Dual-owner writes",
            "Writes services reported that show a user written by two zones (a stale zone writing after the new owner did), per minute, by stale and owner zone. Anything above 0 pages.",
            "short", [("sum by (stale_zone, owner_zone) (increase(tidegate_dual_owner_writes_total[$__rate_interval]))", "{{stale_zone}} after {{owner_zone}}")], width=12, min=0)
    b.panel("stat", "Zone health known",
            "1 when the zone's health source has data; 0 (unknown) holds any drain.",
            "bool", [(f"min by (zone) (tidegate_zone_health_known{{{ZONE}}})", "{{zone}}")], width=12)
    b.row("Plan runs")
    b.panel("timeseries", "Plan run active",
            "1 while a run or drill of the plan is active.",
            "none", [("max by (plan) (tidegate_plan_run_active)", "{{plan}}")], width=6, min=0, max=1)
    b.panel("timeseries", "Plan switch time",
            "Switch time of each plan's latest run (start to last step done; growing while it runs). The RTO alert fires when a running switch exceeds the plan's RTO.",
            "s", [("max by (plan) (tidegate_plan_run_duration_seconds)", "{{plan}}")], width=9, min=0)
    b.panel("timeseries", "Plan runs finished",
            "Finished runs per interval, by plan, outcome and drill.",
            "short", [("sum by (plan, outcome, drill) (increase(tidegate_plan_runs_total[$__rate_interval]))", "{{plan}} {{outcome}} drill={{drill}}")], width=9, min=0)
    return b


def coordinator():
    b = Board("tidegate-coordinator", "tidegate / Coordinator",
              "The coordinator itself: tagging rate and latency, routing version, changes, API errors, the command log and subscribers.")
    b.annotation("Dial changes", 'sum(increase(tidegate_changes_total{action="dial"}[1m])) > 0',
                 "Dial moved", "rgba(255, 152, 48, 1)")
    b.row("Tagging")
    b.panel("timeseries", "Tags by colour and zone",
            "Users tagged per second through GET/POST /v1/tag, by the colour and zone they were given "
            "(recording rule color_zone:tidegate_tag_requests:rate1m).",
            "reqps", [(f"sum by (color, zone) (color_zone:tidegate_tag_requests:rate1m{{{ZONE}}})", "{{color}} ({{zone}})")], min=0)
    b.panel("timeseries", "Tag latency",
            "Time to tag one user inside the handler: p50 and p99 across all instances.",
            "s", [
                ("histogram_quantile(0.5, sum by (le) (rate(tidegate_tag_duration_seconds_bucket[$__rate_interval])))", "p50"),
                ("histogram_quantile(0.99, sum by (le) (rate(tidegate_tag_duration_seconds_bucket[$__rate_interval])))", "p99"),
            ], min=0)
    b.row("Routing state")
    b.panel("stat", "Routing version", "Version of the routing table served.",
            "none", [("max(tidegate_routing_version)", "version")], width=6)
    b.panel("stat", "Blue share", "Share of units routed to blue.",
            "percentunit", [("max(tidegate_routing_blue_ratio)", "blue")], width=6, min=0, max=1)
    b.panel("stat", "Pinned users", "Users pinned to a colour regardless of their unit.",
            "short", [("max(tidegate_routing_pins)", "pins")], width=6)
    b.panel("stat", "Dial changes (1h)", "Dial moves in the last hour.",
            "short", [("sum(increase(tidegate_dial_changes_total[1h]))", "changes")], width=6)
    b.panel("timeseries", "Changes by action",
            "Accepted state changes per interval, by action (dial, pin, drain_step, drain_hold, ...).",
            "short", [("sum by (action) (increase(tidegate_changes_total[$__rate_interval]))", "{{action}}")], min=0)
    b.panel("timeseries", "Command log append latency",
            "p99 time to append and fsync one change to the command log; every change waits for it.",
            "s", [("histogram_quantile(0.99, sum by (le) (rate(tidegate_log_append_duration_seconds_bucket[$__rate_interval])))", "p99")], min=0)
    b.row("API and subscribers")
    b.panel("timeseries", "API errors by code",
            "Requests answered with an error, per second, by error code (recording rule code:tidegate_api_errors:rate1m).",
            "reqps", [("sum by (code) (code:tidegate_api_errors:rate1m)", "{{code}}")], min=0)
    b.panel("timeseries", "Subscribers by state",
            "Routing-table subscribers: current (on the newest version), behind, or stale (silent past the timeout).",
            "short", [("sum by (state) (tidegate_subscribers)", "{{state}}")], min=0)
    return b


def mq_lanes():
    b = Board("tidegate-mq-lanes", "tidegate / MQ lanes",
              "Message-queue lanes: blue producers write the first half of each topic's partitions, green the second; "
              "each zone's consumers read their half. Produce rate and lag per half, members and assignment per zone.",
              with_group=True)
    b.annotation("Dial changes", 'sum(increase(tidegate_changes_total{action="dial"}[1m])) > 0',
                 "Dial moved", "rgba(255, 152, 48, 1)")
    GROUP = 'group=~"$group"'
    b.row("Produce and lag per half")
    b.panel("timeseries", "Produce rate per half",
            "Messages written per second to each half of each lane topic (from the partitions' high watermarks; "
            "recording rule topic_half:tidegate_lane_messages:rate1m). Moving the dial moves this split.",
            "ops", [("sum by (topic, half) (topic_half:tidegate_lane_messages:rate1m)", "{{topic}} {{half}}")], min=0)
    b.panel("timeseries", "Consumer lag per half",
            "Messages in each half not yet committed by the group (recording rule group_half:tidegate_lane_lag_messages:sum, "
            "shared with the TidegateLaneLagGrowing alert). A drained zone keeps its half until this is 0.",
            "short", [(f"sum by (group, topic, half) (group_half:tidegate_lane_lag_messages:sum{{{GROUP}}})", "{{group}} {{half}}")], min=0)
    b.panel("timeseries", "Consumer lag per partition",
            "Uncommitted messages per partition; one hot partition usually means one slow consumer.",
            "short", [(f"max by (group, partition, half) (tidegate_lane_partition_lag_messages{{{GROUP}}})", "{{group}} p{{partition}} ({{half}})")], min=0)
    b.panel("timeseries", "Lag reads failing",
            "Failed reads of a group's offsets from Kafka per second; while they fail, lag is unknown and drains cannot settle.",
            "ops", [(f"sum by (group) (rate(tidegate_lane_lag_read_errors_total{{{GROUP}}}[$__rate_interval]))", "{{group}}")], min=0)
    b.row("Members and assignment")
    b.panel("timeseries", "Members per zone",
            "Live consumers registered per zone; a zone at 0 past the session timeout is down and its half moves to the other zone.",
            "short", [(f'sum by (group, zone) (tidegate_lane_members{{{GROUP}, {ZONE}}})', "{{group}} {{zone}}")], min=0)
    b.panel("timeseries", "Partitions assigned per zone",
            "Partitions each zone's consumers may read now (granted after the previous owner released them).",
            "short", [(f'sum by (group, zone) (tidegate_lane_assigned_partitions{{{GROUP}, {ZONE}}})', "{{group}} {{zone}}")], min=0)
    b.panel("stat", "Assignment generation",
            "Generation of each group's assignment: it grows on every change (members, dial, drains, zone down).",
            "none", [(f"max by (group) (tidegate_lane_generation{{{GROUP}}})", "{{group}}")], width=12)
    return b


def edge():
    b = Board("tidegate-edge", "tidegate / Edge and gateways",
              "tidegate edge processes (job tidegate-edge): whether each edge is connected to a coordinator, how far its table "
              "is behind, and what it answers: gateway checks (nginx auth_request, Envoy ext_authz), tags and OpenFeature evaluations.",
              with_zone=False)
    EDGE = 'job="tidegate-edge"'
    b.row("Coordinator link and table")
    b.panel("state-timeline", "Connected to a coordinator",
            "1 while the edge's watch stream to a coordinator is open. At 0 the edge keeps answering from its last table "
            "(alert TidegateEdgeDisconnected after 2 minutes).",
            "bool", [(f"max by (instance) (tidegate_edge_coordinator_connected{{{EDGE}}})", "{{instance}}")], width=12)
    b.panel("timeseries", "Versions behind the coordinators",
            "Newest routing version any coordinator serves minus the version each edge serves; above 0 for long means "
            "gateways route on an old table (alert TidegateEdgeBehind).",
            "short", [('max(tidegate_routing_version{job="tidegate"}) - on() group_right() '
                       f"max by (instance) (tidegate_routing_version{{{EDGE}}})", "{{instance}}")], width=12, min=0)
    b.panel("timeseries", "Table age",
            "Seconds since each edge received (or loaded from its cache) the table it serves. It grows between changes; "
            "read it with the link above.",
            "s", [(f"max by (instance) (tidegate_edge_table_age_seconds{{{EDGE}}})", "{{instance}}")], min=0)
    b.panel("stat", "Edge routing version",
            "Routing version each edge serves now.",
            "none", [(f"max by (instance) (tidegate_routing_version{{{EDGE}}})", "{{instance}}")])
    b.row("Answers")
    b.panel("timeseries", "Gateway checks by colour and source",
            "GET /v1/gate answers per second, by the colour given and where the user ID came from (header, cookie, query) "
            "or the fallback for requests without one.",
            "reqps", [(f"sum by (color, source) (rate(tidegate_edge_gate_requests_total{{{EDGE}}}[$__rate_interval]))", "{{color}} ({{source}})")], min=0)
    b.panel("timeseries", "Tags on the edge by colour",
            "Users tagged per second by the edges through GET/POST /v1/tag, by colour and zone.",
            "reqps", [(f"sum by (color, zone) (rate(tidegate_tag_requests_total{{{EDGE}}}[$__rate_interval]))", "{{color}} ({{zone}})")], min=0)
    b.panel("timeseries", "OpenFeature evaluations by outcome",
            "OFREP flag evaluations per second on coordinators and edges, by reason (SPLIT, TARGETING_MATCH, DEFAULT) "
            "or error code (TARGETING_KEY_MISSING, FLAG_NOT_FOUND, ...).",
            "reqps", [("sum by (job, outcome) (rate(tidegate_ofrep_evaluations_total[$__rate_interval]))", "{{job}} {{outcome}}")], width=24, min=0)
    return b


def boards():
    return {"zone-health.json": zone_health(), "coordinator.json": coordinator(), "mq-lanes.json": mq_lanes(),
            "edge.json": edge()}


def main():
    check = "--check" in sys.argv
    pinned, installed = pinned_sdk_version(), metadata.version("grafana-foundation-sdk")
    if installed != pinned:
        sys.exit(f"grafana-foundation-sdk {installed} is installed, dashboards/requirements.txt pins {pinned}; "
                 "run: bash scripts/dashboards.sh")
    encoder = JSONEncoder(sort_keys=True, indent=2)
    stale = []
    for name, board in boards().items():
        path = os.path.join(HERE, name)
        text = encoder.encode(board.json()) + "\n"
        if check:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    stale.append(name)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    if stale:
        sys.exit("dashboards out of date (run: bash scripts/dashboards.sh write): " + ", ".join(stale))
    print("dashboards up to date" if check else "dashboards written")


if __name__ == "__main__":
    main()
