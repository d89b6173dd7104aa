//! `GET /api/v1/guests` and `GET /api/v1/guests/{id}`: the ranking, for viewers.

use crate::analysis::cause::Cause;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::cursor;
use super::errors::ReadErrors;
use super::guest_path::{guest_id, reported_guest};
use crate::analysis::change::Change;
use crate::analysis::cost::{self, CostModel};
use tickscope_wire::Platform;

use crate::analysis::suggest::Suggestion;
use crate::analysis::window::CpuSplit;
use crate::auth::Viewer;
use crate::domain::GuestId;
use crate::error::{AppError, AppResult, ErrorBody};
use crate::fleet::listing::{Column, GuestFilter, Order};
use crate::fleet::{self, AnalysedGuest, LiveFleet, Totals, WasteSoFar};
use crate::http::admission::{Spend, take_stream};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(one))
}

/// One guest as the API shows it: flat, with units in the names.
#[derive(Serialize, utoipa::ToSchema)]
struct GuestJson {
    id: i64,
    name: String,
    uuid: Option<String>,
    host: String,
    hypervisor: String,
    management: Option<String>,
    vcpus: u32,
    /// Whether it runs on KVM (false: e.g. QEMU's TCG); absent when the agent could not tell.
    uses_kvm: Option<bool>,
    /// The guest's OS family: `linux`, `windows`, `other` or `unknown` (judged as Linux), and
    /// what said so (`qemu_guest_agent: mswindows`, `manager: win10`).
    os: &'static str,
    os_evidence: Option<String>,
    /// The VM's Hyper-V enlightenments, by QEMU's names without `hv-`; absent when unknown.
    hyperv: Option<Vec<String>>,
    /// Whether the VM has an emulated HPET; absent when unknown.
    hpet: Option<bool>,
    /// The OS the VM's manager names (libosinfo id, Proxmox `ostype`, VMware `guestOS`).
    os_hint: Option<String>,
    /// Who the VM is on its platform (`kind`: openstack, proxmox, kubevirt; its `name` there,
    /// its `group`: Nova project or namespace, its `flavor`, its `id`: VMID or instance UUID);
    /// absent where the agent could not tell.
    platform: Option<Platform>,
    /// Where the agent read its CPU time: `cgroup` (exact), `schedstat` (threads' run time,
    /// nanoseconds) or `stat_ticks` (10 ms ticks); absent from older agents.
    cpu_source: Option<String>,
    /// Host CPU used, in % of one host core.
    host_cpu_pct: Option<f64>,
    /// vCPU wake-ups per vCPU per second.
    wakeups_per_vcpu: Option<f64>,
    /// Share of the window the guest was idle (0 to 1), and what that was judged from:
    /// `reported` (the guest's own idle time), `inferred` (host CPU), `mixed` or `none`.
    idle_share: Option<f64>,
    idle_judged_from: &'static str,
    /// Host CPU and wake-ups over the idle intervals only: what tick mode and waste rest on.
    idle_host_cpu_pct: Option<f64>,
    idle_wakeups_per_vcpu: Option<f64>,
    /// Where the host CPU went among the VM's threads over the same intervals, in % of a core
    /// each; absent when the agent could not split it.
    idle_cpu_split: Option<CpuSplit>,
    /// Host CPU KVM spent halt-polling its vCPUs over the same intervals, in % of a core (KVM's
    /// own count); absent where the agent could not read it.
    idle_halt_poll_pct: Option<f64>,
    tick_mode: &'static str,
    tick_mode_confidence: &'static str,
    estimated_hz: Option<u32>,
    evidence: Vec<String>,
    /// Host CPU wasted while idle, in % of one host core: beyond the tickless baseline for a
    /// guest that ticks or polls, or what a rule prices to another cause (see `cause`).
    wasted_cpu_pct: f64,
    /// The cause of idle burn it is filed under, that of its largest priced suggestion;
    /// absent when nothing is wrong.
    cause: Option<Cause>,
    /// The same waste if it goes on, under the server's cost model (see totals.cost_model).
    wasted_core_hours_per_day: f64,
    wasted_kwh_per_year: f64,
    wasted_cost_per_year: f64,
    baseline_cpu_pct_per_vcpu: f64,
    baseline_learned_from_guests: usize,
    waste_reasoning: String,
    suggestions: Vec<Suggestion>,
    boot_args: Option<String>,
    last_seen_ms: i64,
    window_s: f64,
    intervals: i64,
    // What the guest reported about itself (absent when no channel delivered facts).
    kernel_release: Option<String>,
    distro: Option<String>,
    config_hz: Option<u32>,
    /// The tick rate measured inside the guest, in Hz.
    measured_hz: Option<f64>,
    /// NO_HZ mode the kernel was built with: full, idle, legacy, none or unknown.
    nohz: Option<&'static str>,
    /// The clock event device of the guest's tick (`lapic-deadline`, `pit`, `hpet`, ...).
    tick_device: Option<String>,
    /// Timer-related kernel parameters (`nohz=off`, `idle=poll`, ...).
    cmdline_flags: Option<Vec<String>>,
    facts_source: Option<String>,
    facts_age_s: Option<f64>,
    /// Fraction of time the guest itself was idle, 0 to 1.
    idle_fraction: Option<f64>,
    /// Host CPU before and after the guest's last kernel or command-line change, measured.
    last_change: Option<Change>,
    /// What it wasted so far (only for one guest: `GET /api/v1/guests/{id}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    waste_so_far: Option<WasteSoFarJson>,
}

/// Waste accumulated over the last day and week, in core-hours, with its energy and money under
/// the cost model.
#[derive(Serialize, utoipa::ToSchema)]
struct WasteSoFarJson {
    wasted_core_hours_24h: f64,
    wasted_kwh_24h: f64,
    wasted_cost_24h: f64,
    /// Hours measured in the last 24 h (the guest running and reported), and of them idle.
    measured_hours_24h: f64,
    idle_hours_24h: f64,
    wasted_core_hours_7d: f64,
    wasted_kwh_7d: f64,
    wasted_cost_7d: f64,
    measured_hours_7d: f64,
    idle_hours_7d: f64,
}

impl WasteSoFarJson {
    fn new(w: &WasteSoFar, model: &CostModel) -> Self {
        let (kwh_24h, cost_24h) = cost::of_core_hours(w.last_24h.wasted_core_hours, model);
        let (kwh_7d, cost_7d) = cost::of_core_hours(w.last_7d.wasted_core_hours, model);
        WasteSoFarJson {
            wasted_core_hours_24h: w.last_24h.wasted_core_hours,
            wasted_kwh_24h: kwh_24h,
            wasted_cost_24h: cost_24h,
            measured_hours_24h: w.last_24h.measured_hours,
            idle_hours_24h: w.last_24h.idle_hours,
            wasted_core_hours_7d: w.last_7d.wasted_core_hours,
            wasted_kwh_7d: kwh_7d,
            wasted_cost_7d: cost_7d,
            measured_hours_7d: w.last_7d.measured_hours,
            idle_hours_7d: w.last_7d.idle_hours,
        }
    }
}

impl GuestJson {
    fn new(g: AnalysedGuest, model: &CostModel, last_change: Option<Change>) -> Self {
        let os = g.os();
        let v = g.verdict;
        let yearly = cost::of_waste(v.waste.wasted_cpu_pct, model);
        let k = g.kernel;
        GuestJson {
            os: os.family.as_str(),
            os_evidence: os.evidence,
            hyperv: g.setup.hyperv,
            hpet: g.setup.hpet,
            os_hint: g.setup.os_hint,
            platform: g.platform,
            tick_device: k.as_ref().and_then(|k| k.tick_device.clone()),
            last_change,
            waste_so_far: None,
            kernel_release: k.as_ref().and_then(|k| k.kernel_release.clone()),
            distro: k.as_ref().and_then(|k| k.distro.clone()),
            config_hz: k.as_ref().and_then(|k| k.config_hz),
            measured_hz: k.as_ref().and_then(|k| k.measured_hz),
            nohz: k.as_ref().map(|k| k.nohz.as_str()),
            cmdline_flags: k.as_ref().map(|k| k.cmdline_flags()),
            facts_source: k.as_ref().map(|k| k.source.clone()),
            facts_age_s: k.as_ref().map(|k| k.age_s),
            idle_fraction: k.as_ref().and_then(|k| k.idle_fraction),
            id: g.id.0,
            name: g.name,
            uuid: g.uuid,
            host: g.host,
            hypervisor: g.hypervisor,
            management: g.management,
            vcpus: g.vcpus,
            uses_kvm: g.uses_kvm,
            cpu_source: g.cpu_source,
            host_cpu_pct: v.rates.map(|r| r.host_cpu_pct),
            wakeups_per_vcpu: v.rates.map(|r| r.wakeups_per_vcpu_s),
            idle_share: v.activity.idle_share(),
            idle_judged_from: v.activity.basis(),
            idle_host_cpu_pct: v.idle_rates.map(|r| r.host_cpu_pct),
            idle_wakeups_per_vcpu: v.idle_rates.map(|r| r.wakeups_per_vcpu_s),
            idle_cpu_split: v.split,
            idle_halt_poll_pct: v.halt_poll_pct,
            tick_mode: v.classification.mode.as_str(),
            tick_mode_confidence: v.classification.confidence.as_str(),
            estimated_hz: v.classification.estimated_hz,
            evidence: v.classification.evidence,
            wasted_cpu_pct: v.waste.wasted_cpu_pct,
            cause: v.cause,
            wasted_core_hours_per_day: yearly.core_hours_per_day,
            wasted_kwh_per_year: yearly.kwh_per_year,
            wasted_cost_per_year: yearly.money_per_year,
            baseline_cpu_pct_per_vcpu: v.waste.baseline.cpu_pct_per_vcpu,
            baseline_learned_from_guests: v.waste.baseline.learned_from_guests,
            waste_reasoning: v.waste.reasoning,
            suggestions: v.suggestions,
            boot_args: g.boot_args,
            last_seen_ms: g.last_seen_ms,
            window_s: g.window_s,
            intervals: g.intervals,
        }
    }
}

/// What the changes made so far saved, measured.
#[derive(Serialize, utoipa::ToSchema)]
struct Realised {
    /// Guests whose kernel or command line changed, with enough samples on both sides.
    guests: usize,
    /// Host CPU saved, in % of one core (a change that costs more counts against it).
    saved_cpu_pct: f64,
    saved_cost_per_year: f64,
}

/// The answer of `GET /api/v1/guests`. Streamed, a few guests at a time, in this field order;
/// this type describes it (and tests that the stream writes what serde would).
#[derive(Serialize, utoipa::ToSchema)]
#[cfg_attr(not(test), allow(dead_code))]
struct GuestList {
    /// The guests of this page, in the order asked for (most waste first by default).
    guests: Vec<GuestJson>,
    /// The whole fleet's totals, whatever the filters.
    totals: Totals,
    realised: Realised,
    generated_ms: i64,
    /// Guests that pass the filters, on all pages (the same on every page of a walk).
    matching: usize,
    /// Pass this as `cursor` (with the same filters and sort) for the next page; null on the
    /// last page. The `Link` header holds the whole address of the next page.
    next_cursor: Option<String>,
}

/// What follows the guests in the answer (the fields of [`GuestList`] after `guests`).
#[derive(Serialize)]
struct ListTail {
    totals: Totals,
    realised: Realised,
    generated_ms: i64,
    matching: usize,
    next_cursor: Option<String>,
}

/// The most guests one page holds (about 2 MB of JSON). Without `limit` the answer holds every
/// guest, streamed (see docs/api.md for why).
pub const MAX_LIMIT: u32 = 1000;
/// Guests serialised into one chunk of the streamed answer (some 60 KiB of JSON).
const GUESTS_PER_CHUNK: usize = 32;

/// The order and the page of `GET /api/v1/guests`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(default)]
#[into_params(parameter_in = Query)]
struct PageQuery {
    /// The column to sort by; default `waste` (the ranking: most waste first, then most host
    /// CPU, then name). Ties are broken the same way, then by guest id.
    #[param(inline)]
    sort: Option<Column>,
    /// `asc` or `desc`; the default depends on the column (figures descending, names and ids
    /// ascending).
    #[param(inline)]
    dir: Option<Direction>,
    /// Guests per page, 1 to 1000. Without it, every guest (from the cursor on) in one answer.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// Where to resume: the `next_cursor` of the previous page, with the same filters and sort.
    cursor: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
enum Direction {
    Asc,
    Desc,
}

impl PageQuery {
    fn order(&self) -> Order {
        let column = self.sort.unwrap_or(Column::Waste);
        Order {
            column,
            descending: match self.dir {
                Some(Direction::Asc) => false,
                Some(Direction::Desc) => true,
                None => column.descending_by_default(),
            },
        }
    }

    fn limit(&self) -> AppResult<Option<usize>> {
        match self.limit {
            Some(n) if n == 0 || n > MAX_LIMIT => Err(AppError::BadRequest(format!(
                "limit must be 1 to {MAX_LIMIT} guests per page (or left out for all of them), \
                 not {n}"
            ))),
            limit => Ok(limit.map(|n| n as usize)),
        }
    }

    /// The address of the page after this one: the same filters, order and limit, resumed at
    /// `cursor`.
    fn next_link(&self, filter: &GuestFilter, cursor: &str) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in filter.params() {
            if !value.is_empty() {
                query.append_pair(name, value);
            }
        }
        let order = self.order();
        query.append_pair("sort", order.column.key());
        query.append_pair("dir", if order.descending { "desc" } else { "asc" });
        if let Some(limit) = self.limit {
            query.append_pair("limit", &limit.to_string());
        }
        query.append_pair("cursor", cursor);
        format!("/api/v1/guests?{}", query.finish())
    }
}

/// The active guests, filtered and ordered (most waste first by default), a page at a time
/// with `limit` and `cursor`, with the fleet's totals. Without `limit`, every guest that passes
/// the filters, streamed.
#[utoipa::path(
    get,
    path = "/api/v1/guests",
    operation_id = "list_guests",
    tag = "fleet",
    params(GuestFilter, PageQuery),
    security(("token" = [])),
    responses(
        (status = 200, description = "The ranking, or a page of it", body = GuestList,
            headers(("Link" = String, description = "`<address of the next page>; rel=\"next\"`, on every page but the last"))),
        (status = 400, description = "A `limit` out of range, a `sort` or `dir` not known, or a `cursor` this server did not make for these filters and sort", body = ErrorBody),
        ReadErrors,
    )
)]
async fn list(
    State(state): State<AppState>,
    _viewer: Viewer,
    spend: Option<Extension<Spend>>,
    filter: Result<Query<GuestFilter>, QueryRejection>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> AppResult<Response> {
    let Query(filter) = filter.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let Query(page) = page.map_err(|e| AppError::BadRequest(e.body_text()))?;
    let order = page.order();
    let limit = page.limit()?;
    // Every guest in one answer is a stream of the caller's; a page is small.
    if limit.is_none() {
        take_stream(spend.as_deref(), &state.metrics)?;
    }
    let after = page
        .cursor
        .as_deref()
        .map(|c| cursor::decode(c, order, &filter))
        .transpose()?;
    let now = state.clock.now_ms();
    let published = state.fleet.published();
    // Only guests still reporting count towards what was realised (kept as changes are
    // measured: no walk of them).
    let kept = published.realised(now);
    let model = state.cost_model();
    let realised = Realised {
        guests: kept.guests,
        saved_cpu_pct: kept.saved_cpu_pct,
        saved_cost_per_year: cost::money_per_year(kept.saved_cpu_pct, &model),
    };
    // The page is walked from the kept order, one guest past it to tell whether another page
    // follows: its cost is the page's, not the fleet's (issue 28).
    let listed = published.list(order, &filter, after.as_ref(), now);
    let matching = listed.matching;
    let mut page_guests: Vec<&Arc<AnalysedGuest>> = match limit {
        Some(limit) => listed.guests.take(limit + 1).collect(),
        None => listed.guests.collect(),
    };
    let more = limit.is_some_and(|limit| page_guests.len() > limit);
    if more {
        page_guests.pop();
    }
    let next_cursor = more
        .then(|| page_guests.last())
        .flatten()
        .map(|last| cursor::encode(order, &filter, &order.key(last)));
    // The page as ids: each chunk of the answer reads its guests as they are then, so that a
    // slow reader holds no copy of the fleet.
    let page_guests: Vec<GuestId> = page_guests.iter().map(|g| g.id).collect();
    let tail = ListTail {
        totals: published.index(now).totals(&model),
        realised,
        generated_ms: now,
        matching,
        next_cursor: next_cursor.clone(),
    };
    let body = Body::from_stream(futures_util::stream::iter(list_chunks(
        page_guests,
        from_fleet(state.fleet.clone(), now),
        model,
        &tail,
    )?));
    let mut response = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    if let Some(cursor) = next_cursor {
        let link = format!("<{}>; rel=\"next\"", page.next_link(&filter, &cursor));
        let value =
            HeaderValue::try_from(link).map_err(|e| AppError::encode("the Link header", e))?;
        response.headers_mut().insert(header::LINK, value);
    }
    Ok(response)
}

/// The guests of one chunk of the answer, as they are when it is written: a guest gone since
/// the request came is not among them. With each, its last change measured.
type ReadChunk = Box<dyn FnMut(&[GuestId]) -> Vec<(Arc<AnalysedGuest>, Option<Change>)> + Send>;

/// Reads a chunk's guests from the live fleet as it is then (active as of `now_ms`).
fn from_fleet(fleet: LiveFleet, now_ms: i64) -> ReadChunk {
    Box::new(move |ids| {
        let published = fleet.published();
        ids.iter()
            .filter_map(|id| Some((published.guest(*id, now_ms)?.clone(), published.change(*id))))
            .collect()
    })
}

/// The answer's JSON a chunk at a time: `{"guests":[` and a few guests per chunk, then the
/// tail's fields; what serde would write for a [`GuestList`] of the same values. Each chunk reads
/// its guests with `read`, when it is written, so that a slow reader holds no copy of the fleet.
fn list_chunks(
    guests: Vec<GuestId>,
    mut read: ReadChunk,
    model: CostModel,
    tail: &ListTail,
) -> AppResult<impl Iterator<Item = AppResult<Vec<u8>>> + Send + use<>> {
    let failed = |e| AppError::encode("the guest list as JSON", e);
    let tail = serde_json::to_vec(tail).map_err(failed)?;
    // `{"totals":…}` becomes `],"totals":…}`.
    let mut end = b"],".to_vec();
    end.extend_from_slice(&tail[1..]);
    let mut chunks = guests
        .chunks(GUESTS_PER_CHUNK)
        .map(<[GuestId]>::to_vec)
        .collect::<Vec<_>>()
        .into_iter()
        .peekable();
    let mut opened = false;
    let mut wrote_one = false;
    let mut end = Some(end);
    Ok(std::iter::from_fn(move || {
        let mut chunk = Vec::new();
        if !opened {
            chunk.extend_from_slice(b"{\"guests\":[");
            opened = true;
        }
        for (g, change) in read(&chunks.next().unwrap_or_default()) {
            if wrote_one {
                chunk.push(b',');
            }
            wrote_one = true;
            let json = GuestJson::new(Arc::unwrap_or_clone(g), &model, change);
            if let Err(e) = serde_json::to_writer(&mut chunk, &json) {
                end = None;
                return Some(Err(failed(e)));
            }
        }
        if chunks.peek().is_none() {
            chunk.extend_from_slice(&end.take()?);
        }
        Some(Ok(chunk))
    }))
}

/// One guest, with what it wasted over the last day and week.
#[utoipa::path(
    get,
    path = "/api/v1/guests/{id}",
    operation_id = "get_guest",
    tag = "fleet",
    params(("id" = i64, Path, description = "The guest's id")),
    security(("token" = [])),
    responses(
        (status = 200, description = "The guest", body = GuestJson),
        (status = 404, description = "No guest has this id", body = ErrorBody),
        ReadErrors,
    )
)]
async fn one(
    State(state): State<AppState>,
    _viewer: Viewer,
    id: Result<Path<i64>, PathRejection>,
) -> AppResult<Json<GuestJson>> {
    let id = guest_id(id)?;
    let now = state.clock.now_ms();
    let guest = reported_guest(&state, id, now).await?;
    let change = state.fleet.change(id, now).await?;
    let history =
        fleet::History::load(&state.db, guest.id, now - fleet::WASTE_SO_FAR_MS, now + 1).await?;
    let so_far = history.waste_so_far(&guest, now);
    let mut json = GuestJson::new(Arc::unwrap_or_clone(guest), &state.cost_model(), change);
    json.waste_so_far = Some(WasteSoFarJson::new(&so_far, &state.cost_model()));
    Ok(Json(json))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::analysis::test_window;

    fn guest(id: i64) -> Arc<AnalysedGuest> {
        let window = test_window(2, 0.5 + id as f64, 40.0 * id as f64, Some("nohz=off"));
        Arc::new(AnalysedGuest {
            name: format!("g\"{id}\"\u{202e}"),
            pid: id,
            uses_kvm: Some(true),
            last_seen_ms: 1000 * id,
            ..AnalysedGuest::example(id, &window)
        })
    }

    /// A reader of chunks from `guests`, leaving out `gone`.
    fn reader(
        guests: &[Arc<AnalysedGuest>],
        changes: &HashMap<GuestId, Change>,
        gone: Option<GuestId>,
    ) -> ReadChunk {
        let guests: HashMap<GuestId, Arc<AnalysedGuest>> =
            guests.iter().map(|g| (g.id, g.clone())).collect();
        let changes = changes.clone();
        Box::new(move |ids| {
            ids.iter()
                .filter(|id| Some(**id) != gone)
                .filter_map(|id| Some((guests.get(id)?.clone(), changes.get(id).copied())))
                .collect()
        })
    }

    #[test]
    fn the_streamed_list_is_what_serde_writes_for_it() {
        let model = CostModel::default();
        let change = Change {
            at_ms: 5,
            cpu_before_pct: 3.0,
            cpu_after_pct: 1.0,
            wakeups_before: 100.0,
            wakeups_after: 10.0,
            idle_share_after: 0.9,
            saved_cpu_pct: 2.0,
        };
        let changes = HashMap::from([(GuestId(1), change)]);
        // Guests, and one gone before its chunk was written (its place left out).
        let cases = [
            (0, None),
            (1, None),
            (GUESTS_PER_CHUNK - 1, None),
            (GUESTS_PER_CHUNK, None),
            (2 * GUESTS_PER_CHUNK + 5, None),
            (1, Some(GuestId(1))),
            (GUESTS_PER_CHUNK + 1, Some(GuestId(1))),
            (
                GUESTS_PER_CHUNK + 1,
                Some(GuestId(GUESTS_PER_CHUNK as i64 + 1)),
            ),
        ];
        for (n, gone) in cases {
            let guests: Vec<Arc<AnalysedGuest>> = (1..=n as i64).map(guest).collect();
            let tail = || ListTail {
                totals: fleet::totals(&guests, &model),
                realised: Realised {
                    guests: 1,
                    saved_cpu_pct: 2.0,
                    saved_cost_per_year: 3.0,
                },
                generated_ms: 7,
                matching: n + 3,
                next_cursor: (n > 1).then(|| "abc.def".to_string()),
            };
            let ids = guests.iter().map(|g| g.id).collect();
            let streamed: Vec<Vec<u8>> =
                list_chunks(ids, reader(&guests, &changes, gone), model.clone(), &tail())
                    .unwrap()
                    .collect::<AppResult<_>>()
                    .unwrap();
            assert_eq!(streamed.len(), n.div_ceil(GUESTS_PER_CHUNK).max(1), "{n}");
            let t = tail();
            let whole = GuestList {
                guests: guests
                    .iter()
                    .filter(|g| Some(g.id) != gone)
                    .map(|g| {
                        let change = changes.get(&g.id).copied();
                        GuestJson::new(AnalysedGuest::clone(g), &model, change)
                    })
                    .collect(),
                totals: t.totals,
                realised: t.realised,
                generated_ms: t.generated_ms,
                matching: t.matching,
                next_cursor: t.next_cursor,
            };
            assert_eq!(
                String::from_utf8(streamed.concat()).unwrap(),
                serde_json::to_string(&whole).unwrap(),
                "{n} guests, {gone:?} gone"
            );
        }
    }
}
