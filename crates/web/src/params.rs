//! Query-string parameters for API handlers: [`ApiQuery`] parses them like axum's
//! `Query` but answers a malformed query as an [`ApiError`] (400, JSON), as every
//! endpoint's errors are.

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// The request's query string, deserialized into `T`.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
        }
    }
}

/// `value`, or a 400 saying that parameter `name` is required.
pub fn required<'a>(value: &'a Option<String>, name: &str) -> Result<&'a str, ApiError> {
    value.as_deref().filter(|v| !v.is_empty()).ok_or_else(|| ApiError::bad_request(format!("missing parameter {name}")))
}
