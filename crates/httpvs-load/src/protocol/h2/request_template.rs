//! HTTP/2 request heads, built once per distinct request and cloned for each stream.

use crate::protocol::{RequestSpec, USER_AGENT};
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Uri};

/// A run uses one request (or a handful); more distinct ones than this are rebuilt.
const CACHED_TEMPLATES: usize = 8;

/// Request templates of one connection, keyed by the request they came from.
#[derive(Debug, Default)]
pub struct TemplateCache {
    entries: Vec<(TemplateKey, Request<()>)>,
    next_evict: usize,
}

#[derive(Debug, PartialEq, Eq)]
struct TemplateKey {
    method: Method,
    uri: Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    body_len: usize,
}

impl TemplateKey {
    fn matches(&self, req: &RequestSpec) -> bool {
        self.body_len == req.body.len()
            && self.method == req.method
            && self.uri == req.uri
            && self.headers == req.headers
    }
}

impl TemplateCache {
    /// A fresh copy of the request head for `req`, built on first use.
    pub fn request(&mut self, req: &RequestSpec) -> Request<()> {
        if let Some((_, template)) = self.entries.iter().find(|(k, _)| k.matches(req)) {
            return template.clone();
        }
        let template = build_template(req);
        let key = TemplateKey {
            method: req.method.clone(),
            uri: req.uri.clone(),
            headers: req.headers.clone(),
            body_len: req.body.len(),
        };
        if self.entries.len() < CACHED_TEMPLATES {
            self.entries.push((key, template.clone()));
        } else {
            self.entries[self.next_evict] = (key, template.clone());
            self.next_evict = (self.next_evict + 1) % CACHED_TEMPLATES;
        }
        template
    }
}

/// The h2 request head: `:authority` from the URI (or a `-H host:` override), user-agent
/// unless given, content-length for a body (as h2load sends), and no connection headers.
pub fn build_template(req: &RequestSpec) -> Request<()> {
    let mut uri = req.uri.clone();
    let mut request = Request::new(());
    for (name, value) in &req.headers {
        if *name == header::HOST {
            uri = with_authority(&uri, value).unwrap_or(uri);
        } else if !crate::protocol::connection_specific(name, value) && !value.is_empty() {
            // An empty `-H 'Name:'` sends no such header, ours included, as curl's does.
            request.headers_mut().append(name.clone(), value.clone());
        }
    }
    let given = |wanted: &header::HeaderName| req.headers.iter().any(|(n, _)| n == wanted);
    let headers = request.headers_mut();
    if !given(&header::USER_AGENT) {
        headers.insert(header::USER_AGENT, HeaderValue::from_static(USER_AGENT));
    }
    if !req.body.is_empty() && !headers.contains_key(header::CONTENT_LENGTH) {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(req.body.len()));
    }
    *request.method_mut() = req.method.clone();
    *request.uri_mut() = uri;
    request
}

fn with_authority(uri: &Uri, host: &HeaderValue) -> Option<Uri> {
    let mut parts = uri.clone().into_parts();
    parts.authority = Some(host.to_str().ok()?.parse().ok()?);
    Uri::from_parts(parts).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn template_adds_agent_and_length_and_drops_connection_headers() {
        let req = RequestSpec {
            method: Method::POST,
            uri: "https://127.0.0.1:8443/p?q".parse().unwrap(),
            headers: vec![
                (header::CONNECTION, HeaderValue::from_static("close")),
                (header::HOST, HeaderValue::from_static("example.test")),
                (
                    HeaderName::from_static("x-a"),
                    HeaderValue::from_static("1"),
                ),
            ],
            body: Bytes::from_static(b"hello"),
        };
        let t = build_template(&req);
        assert_eq!(t.uri().to_string(), "https://example.test/p?q");
        assert_eq!(t.headers()["x-a"], "1");
        assert_eq!(t.headers()["content-length"], "5");
        assert_eq!(t.headers()["user-agent"], USER_AGENT);
        assert!(t.headers().get("connection").is_none());
        assert!(t.headers().get("host").is_none());
    }

    /// TE other than "trailers" is HTTP/1.1's alone (RFC 9113 §8.2.2): left out, as the
    /// connection headers are; `TE: trailers` goes.
    #[test]
    fn te_goes_only_as_trailers() {
        let with_te = |value: &'static str| RequestSpec {
            method: Method::GET,
            uri: "http://h/".parse().unwrap(),
            headers: vec![(header::TE, HeaderValue::from_static(value))],
            body: Bytes::new(),
        };
        assert!(build_template(&with_te("gzip"))
            .headers()
            .get("te")
            .is_none());
        assert_eq!(
            build_template(&with_te("trailers")).headers()["te"],
            "trailers"
        );
    }

    /// An empty `-H 'User-Agent:'` sends none, as curl's does.
    #[test]
    fn an_empty_header_is_left_out_with_its_default() {
        let req = RequestSpec {
            method: Method::GET,
            uri: "http://h/".parse().unwrap(),
            headers: vec![(header::USER_AGENT, HeaderValue::from_static(""))],
            body: Bytes::new(),
        };
        assert!(build_template(&req).headers().is_empty());
    }

    #[test]
    fn cache_returns_the_same_head() {
        let req = RequestSpec {
            method: Method::GET,
            uri: "http://h/".parse().unwrap(),
            headers: vec![],
            body: Bytes::new(),
        };
        let mut cache = TemplateCache::default();
        let a = cache.request(&req);
        let b = cache.request(&req);
        assert_eq!(a.uri(), b.uri());
        assert_eq!(cache.entries.len(), 1);
    }
}
