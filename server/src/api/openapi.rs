//! The OpenAPI document's own parts: what it says of the API as a whole, how callers
//! authenticate, and the limits the ingest edge holds reports to. The operations and the types
//! they read and write are described where they are defined.

use utoipa::openapi::schema::{Object, Schema};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{OpenApi, RefOr};

use tickscope_wire::{MAX_BOOT_ARGS_CHARS, MAX_LABEL_CHARS, MAX_NAME_CHARS, MAX_VCPUS};

use crate::ingest::{MAX_HOST_CPUS, MAX_INTERVAL_MS, MIN_INTERVAL_MS};

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "tickscope",
        description = "Agents report what each VM on their host costs while idle; viewers read \
            the ranking, the upgrade plan and the alerts. Every request carries \
            `Authorization: Bearer <token>` with a token made by an admin (`tickscope-server \
            token add`): an agent token posts reports for its host, a guest token posts one \
            guest's facts, a viewer token reads. Errors are JSON: \
            `{\"error\": {\"code\", \"message\", \"field\"}}`.",
        license(name = "MIT OR Apache-2.0")
    ),
    modifiers(&BearerToken),
    tags(
        (name = "agents", description = "What host agents and guest probes send"),
        (name = "fleet", description = "The guests and hosts, ranked by wasted idle CPU"),
        (name = "exports", description = "Reports for kernel-upgrade planning"),
        (name = "alerts", description = "Busy idle guests and silent agents"),
        (name = "changes", description = "Changes made to guests: the check before, the record after, and what each did"),
    )
)]
pub struct ApiDoc;

struct BearerToken;

impl utoipa::Modify for BearerToken {
    fn modify(&self, doc: &mut OpenApi) {
        doc.components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "token",
                SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
            );
    }
}

/// No control characters: the server refuses what `char::is_control` finds.
const NO_CONTROL_CHARS: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";
/// The same, and not blank.
const NAME: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$";
const UUID: &str = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

/// What a string or number in a report must be, as `ingest::validate` checks it.
enum Limit {
    /// Not blank, at most this many characters, no control characters.
    Name(usize),
    /// At most this many characters, no control characters.
    Text(usize),
    Uuid,
    /// An integer from .. to, inclusive.
    Range(i64, i64),
}

/// The limits the document states, from the constants the edge checks against. Limits that
/// depend on other values (CPU time against the interval and the host's CPUs, an interval's end
/// against the server's clock) are only in the descriptions of the error answers.
const EDGE_LIMITS: &[(&str, &str, Limit)] = &[
    ("AgentInfo", "id", Limit::Name(128)),
    ("AgentInfo", "run_id", Limit::Name(128)),
    ("AgentInfo", "version", Limit::Name(64)),
    ("HostInfo", "name", Limit::Name(MAX_NAME_CHARS)),
    ("HostInfo", "cpus", Limit::Range(1, MAX_HOST_CPUS as i64)),
    ("HostInfo", "kernel", Limit::Text(MAX_NAME_CHARS)),
    ("HostInfo", "boot_id", Limit::Uuid),
    (
        "Interval",
        "length_ns",
        Limit::Range(
            MIN_INTERVAL_MS as i64 * 1_000_000,
            MAX_INTERVAL_MS as i64 * 1_000_000,
        ),
    ),
    ("GuestSample", "name", Limit::Name(MAX_NAME_CHARS)),
    ("GuestSample", "management", Limit::Name(MAX_LABEL_CHARS)),
    ("GuestSample", "uuid", Limit::Uuid),
    ("GuestSample", "vcpus", Limit::Range(1, MAX_VCPUS as i64)),
    ("GuestSample", "boot_args", Limit::Text(MAX_BOOT_ARGS_CHARS)),
    ("VmConfig", "os_hint", Limit::Text(MAX_LABEL_CHARS)),
];

/// Writes the edge's limits into the schemas of a document that has the report's types (the
/// operations bring them in, so this runs once they are all merged).
pub fn state_edge_limits(doc: &mut OpenApi) {
    let schemas = &mut doc
        .components
        .as_mut()
        .expect("the document has components")
        .schemas;
    for (schema, property, limit) in EDGE_LIMITS {
        let Some(RefOr::T(Schema::Object(object))) = schemas.get_mut(*schema) else {
            panic!("no object schema {schema} in the OpenAPI document");
        };
        let Some(RefOr::T(Schema::Object(field))) = object.properties.get_mut(*property) else {
            panic!("no property {schema}.{property} in the OpenAPI document");
        };
        apply(field, limit);
    }
}

fn apply(field: &mut Object, limit: &Limit) {
    match *limit {
        Limit::Name(max) => {
            field.min_length = Some(1);
            field.max_length = Some(max);
            field.pattern = Some(NAME.into());
        }
        Limit::Text(max) => {
            field.max_length = Some(max);
            field.pattern = Some(NO_CONTROL_CHARS.into());
        }
        Limit::Uuid => field.pattern = Some(UUID.into()),
        Limit::Range(min, max) => {
            field.minimum = Some(utoipa::Number::Int(min as isize));
            field.maximum = Some(utoipa::Number::Int(max as isize));
        }
    }
}

/// Adds to every operation the answers any request may get from the admission (see
/// `http::admission`): 429 when its credential has as many requests, streams or body bytes in
/// flight as it may, 503 when every request slot of its kind was taken for over a second.
pub fn state_admission_answers(doc: &mut OpenApi) {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    use utoipa::openapi::{ContentBuilder, HeaderBuilder, Ref, ResponseBuilder};
    let answer = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .header(
                "Retry-After",
                HeaderBuilder::new()
                    .schema(Some(ObjectBuilder::new().schema_type(Type::Integer)))
                    .description(Some("Seconds to wait"))
                    .build(),
            )
            .build()
    };
    let busy = answer("The server is serving as many requests as it can; see Retry-After");
    let spent = answer(
        "The caller (its token, session or address) has as many requests, streamed answers or \
         body bytes in flight as it may (docs/security.md); see Retry-After",
    );
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            let responses = &mut operation.responses.responses;
            responses
                .entry("503".to_string())
                .or_insert_with(|| RefOr::T(busy.clone()));
            responses
                .entry("429".to_string())
                .or_insert_with(|| RefOr::T(spent.clone()));
        }
    }
}
