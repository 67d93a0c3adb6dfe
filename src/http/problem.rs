//! An HTTP answer that refuses: the status chosen from the refusal's
//! stable code, and the body every wire uses for a refusal,
//! `{"error": {"code": "...", "message": "..."}}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use web_crawler_actors::{ControlError, Refusal, RefusalCode};

/// The HTTP status of a refusal with `code`.
pub fn status_of(code: RefusalCode) -> StatusCode {
    use RefusalCode as C;
    match code {
        C::BadRequest | C::InvalidUrl | C::BadOperation | C::BadInterval | C::ReplyTooLarge => {
            StatusCode::BAD_REQUEST
        }
        C::Unauthorized => StatusCode::UNAUTHORIZED,
        C::Timeout => StatusCode::REQUEST_TIMEOUT,
        C::NotFound => StatusCode::NOT_FOUND,
        C::AlreadyKnown | C::OverBudget | C::Conflict | C::NoIndex => StatusCode::CONFLICT,
        C::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        // Well-formed, and refused by the crawl's rules.
        C::OutOfScope | C::Filtered | C::Trap | C::TooDeep => StatusCode::UNPROCESSABLE_ENTITY,
        C::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
        C::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A refused request.
#[derive(Debug)]
pub struct ApiError(pub Refusal);

impl ApiError {
    pub fn new(code: RefusalCode, message: impl Into<String>) -> Self {
        Self(Refusal::new(code, message))
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(RefusalCode::BadRequest, message)
    }
}

impl From<ControlError> for ApiError {
    fn from(e: ControlError) -> Self {
        Self(e.refusal())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = status_of(self.0.code);
        let body = serde_json::json!({ "error": self.0 });
        refusal_response(status, self.0.code, body)
    }
}

/// A JSON body with `status`, and the headers a refusal with `code` asks
/// for: how to authenticate, when to come back.
pub(crate) fn refusal_response(
    status: StatusCode,
    code: RefusalCode,
    body: serde_json::Value,
) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    let headers = response.headers_mut();
    if code == RefusalCode::Unauthorized {
        headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    if code.retryable() {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_code_has_the_status_the_book_gives_it() {
        use RefusalCode as C;
        for (code, status) in [
            (C::BadRequest, 400),
            (C::InvalidUrl, 400),
            (C::Unauthorized, 401),
            (C::NotFound, 404),
            (C::AlreadyKnown, 409),
            (C::OverBudget, 409),
            (C::TooLarge, 413),
            (C::OutOfScope, 422),
            (C::TooManyRequests, 429),
            (C::Unavailable, 503),
            (C::Internal, 500),
            (C::Other, 500),
        ] {
            assert_eq!(status_of(code).as_u16(), status, "{code}");
        }
    }

    #[tokio::test]
    async fn a_refusal_answers_its_code_and_sentence_in_json() {
        let response = ApiError::new(RefusalCode::Unauthorized, "no token").into_response();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()[header::WWW_AUTHENTICATE], "Bearer");
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        assert_eq!(
            &body[..],
            br#"{"error":{"code":"unauthorized","message":"no token"}}"#
        );
        let busy = ApiError::new(RefusalCode::TooManyRequests, "busy").into_response();
        assert_eq!(busy.headers()[header::RETRY_AFTER], "1");
    }
}
