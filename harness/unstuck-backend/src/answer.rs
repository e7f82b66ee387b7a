//! What the backend answers, by role and fault.

use std::fmt;

use serde_json::{Value, json};

use crate::http::{Reply, Request};

pub enum Role {
    Webhook,
    ApiService { group: String, version: String },
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Read the request and never answer.
    Hang,
    /// Answer every request with 500.
    Error500,
    /// Answer a review with an AdmissionReview that has no `response`.
    MalformedReview,
}

pub struct Behaviour {
    pub role: Role,
    pub fault: Fault,
}

fn json_reply(status: u16, v: &Value) -> Reply {
    Reply::Send {
        status,
        content_type: "application/json",
        body: v.to_string().into_bytes(),
    }
}

impl fmt::Display for Behaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.role {
            Role::Webhook => write!(f, "an admission webhook")?,
            Role::ApiService { group, version } => {
                write!(f, "the aggregated API {group}/{version}")?
            }
        }
        f.write_str(match self.fault {
            Fault::None => " answering normally",
            Fault::Hang => " that never answers",
            Fault::Error500 => " answering 500",
            Fault::MalformedReview => " answering malformed reviews",
        })
    }
}

impl Behaviour {
    pub fn answer(&self, req: &Request) -> Reply {
        // Health checks answer whatever the fault, so a hang is the
        // backend's, not a dead process's.
        if req.path == "/healthz" {
            return Reply::Send {
                status: 200,
                content_type: "text/plain",
                body: b"ok".to_vec(),
            };
        }
        match self.fault {
            Fault::Hang => return Reply::Never,
            Fault::Error500 => {
                return Reply::Send {
                    status: 500,
                    content_type: "text/plain",
                    body: b"unstuck-backend: internal error (fault error500)".to_vec(),
                };
            }
            Fault::None | Fault::MalformedReview => {}
        }
        match &self.role {
            Role::Webhook => self.review(req),
            Role::ApiService { group, version } => discovery(&req.path, group, version),
        }
    }

    fn review(&self, req: &Request) -> Reply {
        let review: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        if self.fault == Fault::MalformedReview {
            return json_reply(
                200,
                &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            );
        }
        let uid = review["request"]["uid"].clone();
        json_reply(
            200,
            &json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": uid, "allowed": true}
            }),
        )
    }
}

fn discovery(path: &str, group: &str, version: &str) -> Reply {
    let path = path.split('?').next().unwrap_or_default();
    let gv = format!("{group}/{version}");
    if path == format!("/apis/{gv}") {
        return json_reply(
            200,
            &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": []}),
        );
    }
    if path == format!("/apis/{group}") {
        let v = json!({"groupVersion": gv, "version": version});
        return json_reply(
            200,
            &json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [v], "preferredVersion": v}),
        );
    }
    if path == "/apis" {
        let v = json!({"groupVersion": gv, "version": version});
        return json_reply(
            200,
            &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [{"name": group, "versions": [v], "preferredVersion": v}]}),
        );
    }
    json_reply(
        404,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                "message": format!("{path} is not served here")}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(path: &str, body: &str) -> Request {
        Request {
            method: "POST".into(),
            path: path.into(),
            body: body.as_bytes().to_vec(),
        }
    }

    fn body(r: Reply) -> (u16, Value) {
        match r {
            Reply::Send { status, body, .. } => {
                (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
            }
            Reply::Never => panic!("no reply"),
        }
    }

    #[test]
    fn a_webhook_allows_with_the_request_uid_unless_told_otherwise() {
        let review = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"abc-1"}}"#;
        let ok = Behaviour {
            role: Role::Webhook,
            fault: Fault::None,
        };
        let (status, v) = body(ok.answer(&req("/validate", review)));
        assert_eq!(status, 200);
        assert_eq!(v["response"]["uid"], "abc-1");
        assert_eq!(v["response"]["allowed"], true);

        let bad = Behaviour {
            role: Role::Webhook,
            fault: Fault::MalformedReview,
        };
        let (_, v) = body(bad.answer(&req("/validate", review)));
        assert!(v.get("response").is_none(), "{v}");

        let hang = Behaviour {
            role: Role::Webhook,
            fault: Fault::Hang,
        };
        assert!(matches!(
            hang.answer(&req("/validate", review)),
            Reply::Never
        ));
        assert!(matches!(
            hang.answer(&req("/healthz", "")),
            Reply::Send { status: 200, .. }
        ));
        let e500 = Behaviour {
            role: Role::Webhook,
            fault: Fault::Error500,
        };
        assert!(matches!(
            e500.answer(&req("/validate", review)),
            Reply::Send { status: 500, .. }
        ));
    }

    #[test]
    fn an_api_service_serves_its_group_version_discovery() {
        let b = Behaviour {
            role: Role::ApiService {
                group: "metrics.example.com".into(),
                version: "v1beta1".into(),
            },
            fault: Fault::None,
        };
        let (status, v) = body(b.answer(&req("/apis/metrics.example.com/v1beta1?timeout=32s", "")));
        assert_eq!(status, 200);
        assert_eq!(v["groupVersion"], "metrics.example.com/v1beta1");
        assert_eq!(v["kind"], "APIResourceList");
        let (status, _) = body(b.answer(&req("/apis/other/v1", "")));
        assert_eq!(status, 404);
    }
}
