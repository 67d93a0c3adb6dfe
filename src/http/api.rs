//! The routes: each reads its parameters, makes one `ControlRequest` (a
//! few: one per batch or per setting) and answers the reply's JSON, as the
//! console's `--json` prints it.

use super::Api;
use super::body::{Item, UrlsBody, batches, parse_urls};
use super::problem::{ApiError, refusal_response, status_of};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, extract::FromRequest};
use http_body_util::BodyExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::time::Duration;
use web_crawler_actors::{
    ActorState, Added, ControlReply, ControlRequest, OperationSpec, RefusalCode, Setting,
    UrlOutcome,
};

type Shared = State<Arc<Api>>;
type Answer = Result<Json<ControlReply>, ApiError>;

/// The routes; the writes (`POST`, `PUT`) behind the token.
pub(crate) fn routes(api: &Arc<Api>) -> Router<Arc<Api>> {
    let write = || axum::middleware::from_fn_with_state(api.clone(), super::writes);
    Router::new()
        .route("/", get(|| asset("text/html; charset=utf-8", PAGE_HTML)))
        .route(
            "/openapi.json",
            get(|| asset("application/json", OPENAPI_JSON)),
        )
        .route(
            "/app.js",
            get(|| asset("text/javascript; charset=utf-8", PAGE_JS)),
        )
        .route(
            "/app.css",
            get(|| asset("text/css; charset=utf-8", PAGE_CSS)),
        )
        .route("/status", get(status))
        .route("/nodes", get(nodes))
        .route("/hosts", get(hosts))
        .route("/traps", get(traps))
        .route("/traps/reopen", post(reopen_trap).route_layer(write()))
        .route("/pages", get(page))
        .route("/failed", get(failed))
        .route("/search", get(search))
        .route(
            "/search_text",
            get(search_text_results).merge(post(search_text).route_layer(write())),
        )
        .route("/urls", post(add_urls).route_layer(write()))
        .route(
            "/settings",
            get(settings).merge(put(put_settings).route_layer(write())),
        )
        .route("/pause", post(pause).route_layer(write()))
        .route("/resume", post(resume).route_layer(write()))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
}

/// The API described for tools (OpenAPI 3.1): written by hand beside the
/// routes, checked against README's endpoint table by a test.
const OPENAPI_JSON: &str = include_str!("openapi.json");
const PAGE_HTML: &str = include_str!("page/index.html");
const PAGE_JS: &str = include_str!("page/app.js");
const PAGE_CSS: &str = include_str!("page/app.css");

/// A file of the web page: no script or style from anywhere else runs in it.
async fn asset(content_type: &'static str, text: &'static str) -> Response {
    let mut response = text.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
        ),
    );
    response
}

async fn not_found(request: Request) -> ApiError {
    ApiError::new(
        RefusalCode::NotFound,
        format!(
            "no {} here: see the README's endpoint table",
            request.uri().path()
        ),
    )
}

async fn method_not_allowed(request: Request) -> Response {
    let refusal = serde_json::json!({"error": {
        "code": RefusalCode::BadRequest,
        "message": format!("{} does not take {}", request.uri().path(), request.method()),
    }});
    refusal_response(
        StatusCode::METHOD_NOT_ALLOWED,
        RefusalCode::BadRequest,
        refusal,
    )
}

/// Query parameters, unknown ones refused (400 with why).
struct Params<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(t)| Params(t))
            .map_err(|e| ApiError::bad_request(e.body_text()))
    }
}

/// A JSON body of at most `Limits::body_bytes`, unknown fields refused.
struct JsonBody<T>(T);

impl<T: DeserializeOwned> FromRequest<Arc<Api>> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, api: &Arc<Api>) -> Result<Self, ApiError> {
        let limits = &api.limits;
        let bytes = read_body(request, limits.body_bytes, limits.body_timeout).await?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request(format!("the body is not what this takes: {e}")))
    }
}

/// A request's body: at most `limit` bytes, all of it within `timeout`.
async fn read_body(request: Request, limit: usize, timeout: Duration) -> Result<Bytes, ApiError> {
    let too_large = || {
        ApiError::new(
            RefusalCode::TooLarge,
            format!("the body is over the {limit} bytes this takes"),
        )
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let body = http_body_util::Limited::new(request.into_body(), limit);
    match tokio::time::timeout(timeout, body.collect()).await {
        Err(_) => Err(ApiError::new(
            RefusalCode::Timeout,
            format!("the body did not arrive within {} s", timeout.as_secs()),
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(e)) => Err(ApiError::bad_request(format!(
            "the body could not be read: {e}"
        ))),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

async fn ask(api: &Api, request: ControlRequest) -> Answer {
    Ok(Json(api.control.request(&request).await?))
}

/// `?limit=N`, at most `max`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitParam {
    limit: Option<usize>,
}

fn limit(given: Option<usize>, default: usize, max: usize) -> Result<usize, ApiError> {
    match given {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::bad_request(format!("limit {n}: give 1 to {max}"))),
    }
}

async fn status(State(api): Shared) -> Answer {
    ask(&api, ControlRequest::Status).await
}

async fn nodes(State(api): Shared) -> Answer {
    ask(&api, ControlRequest::Nodes).await
}

async fn hosts(State(api): Shared, Params(p): Params<LimitParam>) -> Answer {
    let limit = limit(p.limit, 50, 1_000)?;
    ask(&api, ControlRequest::Hosts { limit }).await
}

async fn traps(State(api): Shared, Params(p): Params<LimitParam>) -> Answer {
    let limit = limit(p.limit, 50, 1_000)?;
    ask(&api, ControlRequest::Traps { limit }).await
}

async fn failed(State(api): Shared, Params(p): Params<LimitParam>) -> Answer {
    let limit = limit(p.limit, 20, 1_000)?;
    ask(&api, ControlRequest::Failed { limit }).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Family {
    family: String,
}

async fn reopen_trap(State(api): Shared, JsonBody(f): JsonBody<Family>) -> Answer {
    ask(&api, ControlRequest::ReopenTrap { family: f.family }).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UrlParam {
    url: String,
}

async fn page(State(api): Shared, Params(p): Params<UrlParam>) -> Answer {
    ask(&api, ControlRequest::Page { url: p.url }).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchParams {
    q: String,
    limit: Option<usize>,
    offset: Option<usize>,
}

async fn search(State(api): Shared, Params(p): Params<SearchParams>) -> Answer {
    if p.q.trim().is_empty() {
        return Err(ApiError::bad_request(
            "q is empty: give the words to search for",
        ));
    }
    let offset = p.offset.unwrap_or(0);
    if offset > 1_000 {
        return Err(ApiError::bad_request(format!(
            "offset {offset}: at most 1000"
        )));
    }
    let request = ControlRequest::Search {
        query: p.q,
        limit: limit(p.limit, 10, 100)?,
        offset,
    };
    ask(&api, request).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextParams {
    text: Option<String>,
    limit: Option<usize>,
}

/// Where the paper's `search_text` found its text (every text without one).
async fn search_text_results(State(api): Shared, Params(p): Params<TextParams>) -> Answer {
    let request = ControlRequest::TextMatchHits {
        text: p.text,
        limit: limit(p.limit, 50, 1_000)?,
    };
    ask(&api, request).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextMatchBody {
    url: String,
    text: String,
}

/// The paper's `search_text(URL, Text)`: crawl from `url` recording
/// where `text` stands on each page.
async fn search_text(State(api): Shared, JsonBody(s): JsonBody<TextMatchBody>) -> Response {
    if s.text.is_empty() {
        return ApiError::bad_request("text is empty: give the text to look for").into_response();
    }
    add_one(&api, s.url, OperationSpec::search_text(s.text), false).await
}

/// `POST /urls`'s options, in its query string.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddParams {
    /// Fetch URLs processed already again.
    #[serde(default)]
    again: bool,
    /// Archive their responses (the mirror operation).
    #[serde(default)]
    mirror: bool,
}

/// Queue one URL (`202` and its normalized form, or the refusal's status),
/// or many (`200` and each one's outcome).
async fn add_urls(
    State(api): Shared,
    Params(p): Params<AddParams>,
    headers: HeaderMap,
    request: Request,
) -> Response {
    let ndjson = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| {
            let t = t.split(';').next().unwrap_or("").trim();
            matches!(t, "application/x-ndjson" | "application/jsonl")
        });
    let limits = &api.limits;
    let body = match read_body(request, limits.urls_body_bytes, limits.body_timeout).await {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    let operation = if p.mirror {
        crate::operations::mirror()
    } else {
        OperationSpec::crawl()
    };
    match parse_urls(&body, ndjson) {
        Err(why) => ApiError::bad_request(why).into_response(),
        Ok(UrlsBody::One(url)) => add_one(&api, url, operation, p.again).await,
        Ok(UrlsBody::Many(items)) => match add_many(&api, items, operation, p.again).await {
            Ok(added) => Json(added).into_response(),
            Err(e) => e.into_response(),
        },
    }
}

/// One URL's `add_url`: its outcome, with `202 Accepted` or the status of
/// its refusal.
async fn add_one(api: &Api, url: String, operation: OperationSpec, again: bool) -> Response {
    let request = ControlRequest::AddUrl {
        url: url.clone(),
        operation,
        again,
        every_ms: None,
    };
    let answer = match api.control.request(&request).await {
        Ok(ControlReply::Queued(queued)) => Ok(queued),
        Ok(other) => {
            tracing::error!(?other, "add_url answered with another reply");
            return ApiError::new(RefusalCode::Internal, "the node answered another request")
                .into_response();
        }
        Err(e) => Err(e),
    };
    let outcome = UrlOutcome::of(url, answer);
    let status = match &outcome.error {
        None => StatusCode::ACCEPTED,
        Some(refusal) => status_of(refusal.code),
    };
    (status, Json(outcome)).into_response()
}

/// Many URLs' `add_url`, in batches the control actor takes: every item's
/// outcome in order. A batch the node could not take (its master
/// restarting) refuses its URLs with that code; if it was the first, and
/// so nothing was queued, the whole request is refused.
async fn add_many(
    api: &Api,
    items: Vec<Item>,
    operation: OperationSpec,
    again: bool,
) -> Result<Added, ApiError> {
    let mut outcomes: Vec<Option<UrlOutcome>> = Vec::with_capacity(items.len());
    let mut urls = Vec::new();
    let mut at = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Item::Url(url) => {
                urls.push(url);
                at.push(i);
                outcomes.push(None);
            }
            Item::Bad { what, why } => outcomes.push(Some(UrlOutcome::refused(
                what,
                web_crawler_actors::Refusal::new(RefusalCode::BadRequest, why),
            ))),
        }
    }
    for (n, range) in batches(&urls).into_iter().enumerate() {
        let request = ControlRequest::AddUrls {
            urls: urls[range.clone()].to_vec(),
            operation: operation.clone(),
            again,
        };
        let results = match api.control.request(&request).await {
            Ok(ControlReply::Added(added)) => added.results,
            Ok(_) => return Err(ApiError::new(RefusalCode::Internal, "another reply")),
            Err(e) if n == 0 => return Err(e.into()),
            Err(e) => urls[range.clone()]
                .iter()
                .map(|url| UrlOutcome::refused(url.clone(), e.refusal()))
                .collect(),
        };
        for (i, outcome) in range.zip(results) {
            outcomes[at[i]] = Some(outcome);
        }
    }
    Ok(Added::of(outcomes.into_iter().flatten().collect()))
}

/// The settings `set` changes, as `GET /settings` shows them.
#[derive(Debug, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    #[serde(skip_serializing_if = "Option::is_none")]
    delay_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    per_host: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    concurrency: Option<usize>,
}

async fn current_settings(api: &Api) -> Result<Settings, ApiError> {
    let request = ControlRequest::State {
        actor: "config".into(),
    };
    match api.control.request(&request).await? {
        ControlReply::State(ActorState::Config(cfg)) => Ok(Settings {
            delay_ms: Some(cfg.min_delay.as_millis() as u64),
            per_host: Some(cfg.per_host),
            concurrency: Some(cfg.concurrency),
        }),
        _ => Err(ApiError::new(RefusalCode::Internal, "another reply")),
    }
}

async fn settings(State(api): Shared) -> Result<Json<Settings>, ApiError> {
    Ok(Json(current_settings(&api).await?))
}

/// Change settings on every live node (as `set` does, one by one): the
/// settings after, and the nodes that took them.
async fn put_settings(
    State(api): Shared,
    JsonBody(wanted): JsonBody<Settings>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let changes: Vec<Setting> = [
        wanted.delay_ms.map(Setting::DelayMs),
        wanted.per_host.map(Setting::PerHost),
        wanted.concurrency.map(Setting::Concurrency),
    ]
    .into_iter()
    .flatten()
    .collect();
    if changes.is_empty() {
        return Err(ApiError::bad_request(
            "no setting given: delay_ms, per_host or concurrency",
        ));
    }
    let mut nodes = Vec::new();
    for setting in changes {
        if let ControlReply::SettingChanged(changed) = api
            .control
            .request(&ControlRequest::Set { setting })
            .await?
        {
            nodes = changed.nodes;
        }
    }
    let now = current_settings(&api).await?;
    let mut answer = serde_json::to_value(now).unwrap_or_default();
    answer["nodes"] = nodes.into();
    Ok(Json(answer))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HostParam {
    host: Option<String>,
}

async fn pause(State(api): Shared, Params(p): Params<HostParam>) -> Answer {
    pause_or_resume(&api, p.host, true).await
}

async fn resume(State(api): Shared, Params(p): Params<HostParam>) -> Answer {
    pause_or_resume(&api, p.host, false).await
}

/// The crawl, or one host (`?host=h[:port]`) on every node.
async fn pause_or_resume(api: &Api, host: Option<String>, paused: bool) -> Answer {
    let request = match (host, paused) {
        (Some(host), paused) => ControlRequest::PauseHost { host, paused },
        (None, true) => ControlRequest::Pause,
        (None, false) => ControlRequest::Resume,
    };
    ask(api, request).await
}

#[cfg(test)]
mod tests {
    use super::OPENAPI_JSON;
    use crate::http::problem::status_of;
    use std::collections::BTreeSet;
    use web_crawler_actors::RefusalCode;

    const README: &str = include_str!("../../README.md");

    /// The rows of README's table that starts with `header`: their cells.
    fn table(header: &str) -> Vec<Vec<String>> {
        README
            .lines()
            .skip_while(|l| !l.starts_with(header))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                l.trim_matches('|')
                    .split(" | ")
                    .map(|c| c.trim().to_string())
                    .collect()
            })
            .collect()
    }

    /// The backticked pieces of a cell.
    fn quoted(cell: &str) -> Vec<&str> {
        cell.split('`').skip(1).step_by(2).collect()
    }

    #[test]
    fn the_openapi_document_lists_readmes_routes() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).unwrap();
        let documented: BTreeSet<String> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, ops)| {
                ops.as_object()
                    .unwrap()
                    .keys()
                    .map(move |m| format!("{} {path}", m.to_uppercase()))
            })
            .collect();
        let in_readme: BTreeSet<String> = table("| method and path |")
            .iter()
            .flat_map(|row| {
                quoted(&row[0])
                    .into_iter()
                    .map(|r| r.split('?').next().unwrap_or(r).to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert!(in_readme.len() >= 15, "{in_readme:?}");
        assert_eq!(documented, in_readme);
    }

    #[test]
    fn the_openapi_document_names_every_field_of_a_search_result() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).unwrap();
        let result = &doc["paths"]["/search"]["get"]["responses"]["200"]["content"]["application/json"]
            ["schema"]["properties"]["results"]["items"]["properties"];
        let documented: BTreeSet<&str> = result
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // Every optional field present.
        let hit = crate::search::SearchHit {
            url: "http://h/f.html".into(),
            title: "F".into(),
            snippet: "s".into(),
            score: 1.0,
            highlights: vec![std::ops::Range { start: 0, end: 1 }],
            section_url: Some("http://h/f.html#s".into()),
            heading_path: vec!["F".into()],
        };
        let json = serde_json::to_value(hit).unwrap();
        let sent: BTreeSet<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(documented, sent);
    }

    #[test]
    fn every_refusal_code_is_documented_with_its_status() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).unwrap();
        let codes: BTreeSet<String> = doc["components"]["schemas"]["RefusalCode"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        let mut in_readme = BTreeSet::new();
        for row in table("| code | status | when |") {
            for code in quoted(&row[0]) {
                let parsed: RefusalCode = serde_json::from_value(code.into()).unwrap();
                assert_ne!(parsed, RefusalCode::Other, "{code} is a code");
                assert_eq!(parsed.as_str(), code);
                assert_eq!(status_of(parsed).as_str(), row[1], "{code}'s status");
                in_readme.insert(code.to_string());
            }
        }
        assert_eq!(codes, in_readme);
    }
}
