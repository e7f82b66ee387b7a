//! What to look for in the cluster for one key: the domains it names and
//! the product words in them (`acme.cert-manager.io/finalizer` names
//! `acme.cert-manager.io`, `cert-manager.io` and the product
//! `cert-manager`). Matching is wide on purpose: anything that shares a
//! word with a key can only make its owner `Alive` or `Unknown`, the safe
//! direction.

use super::known_keys::KnownKey;

/// Tokens too common to name a product: they appear in the keys and the
/// workloads of unrelated projects alike.
const GENERIC: &[&str] = &[
    "api",
    "apis",
    "app",
    "apps",
    "cleanup",
    "com",
    "controller",
    "controllers",
    "core",
    "dev",
    "example",
    "finalize",
    "finalizer",
    "finalizers",
    "install",
    "internal",
    "io",
    "k8s",
    "kube",
    "kubernetes",
    "net",
    "operator",
    "operators",
    "org",
    "pod",
    "pods",
    "protect",
    "protection",
    "resource",
    "resources",
    "system",
    // This tool's own name: its runner applies every scenario object as
    // field manager `unstuck`, and it serves no finalizer of its own.
    "unstuck",
    "www",
    "x",
];

/// Parent domains shared by many unrelated projects: a key under one of
/// them names its own domain only, never the shared parent.
const SHARED_PARENTS: &[&str] = &["k8s.io", "kubernetes.io", "x-k8s.io", "github.io"];

/// What a key's owner would be called.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnerWords {
    /// The key's domain and its parents down to two labels, shared
    /// parents left out.
    pub domains: Vec<String>,
    /// Product words, each a `-`-joined token sequence (`cert-manager`).
    pub words: Vec<String>,
}

impl OwnerWords {
    /// The target of `finalizer`, widened by the known-key table.
    pub fn of(finalizer: &str, known: Option<&KnownKey>) -> OwnerWords {
        let domain = match finalizer.split_once('/') {
            Some((domain, _)) => Some(domain),
            None if finalizer.contains('.') => Some(finalizer),
            None => None,
        };
        let mut t = OwnerWords::default();
        match domain {
            Some(domain) => {
                let domain = domain.to_ascii_lowercase();
                for d in candidate_domains(&domain) {
                    if d == domain || !SHARED_PARENTS.contains(&d.as_str()) {
                        t.domains.push(d);
                    }
                }
                let labels: Vec<&str> = domain.split('.').collect();
                let named = if labels.len() >= 2 {
                    &labels[..labels.len() - 1]
                } else {
                    &labels[..]
                };
                for label in named {
                    t.add_word(label);
                }
            }
            None => t.add_word(&finalizer.to_ascii_lowercase()),
        }
        if let Some(k) = known {
            // Known names are kept whole: `ks-controller-manager` is a
            // name, not a product word to be filtered.
            for w in k.look_for {
                let w = w.to_ascii_lowercase();
                if !t.words.contains(&w) {
                    t.words.push(w);
                }
            }
        }
        t
    }

    fn add_word(&mut self, raw: &str) {
        let kept: Vec<&str> = tokens(raw)
            .into_iter()
            .filter(|t| !GENERIC.contains(t))
            .collect();
        let word = kept.join("-");
        if word.len() >= 3 && !self.words.contains(&word) {
            self.words.push(word);
        }
    }

    /// Whether there is anything to look for at all.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty() && self.words.is_empty()
    }

    /// What in `text` names the owner (`domain cert-manager.io` or
    /// `word cert-manager`), if anything. A domain counts only where the
    /// text names that very domain: `validate.policy.example.com` is a
    /// name under `example.com`, chosen by whoever made it, not a sign of
    /// `example.com`'s owner.
    pub fn named_in(&self, text: &str) -> Option<String> {
        let lower = text.to_ascii_lowercase();
        if let Some(d) = self.domains.iter().find(|d| names_domain(&lower, d)) {
            return Some(format!("domain {d}"));
        }
        let have = tokens(&lower);
        self.words
            .iter()
            .find(|w| {
                let want = tokens(w);
                !want.is_empty() && have.windows(want.len()).any(|win| win == want.as_slice())
            })
            .map(|w| format!("word {w}"))
    }

    /// `domains a, b; words c, d` for evidence lines.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.domains.is_empty() {
            parts.push(format!("domain {}", self.domains.join(" or ")));
        }
        if !self.words.is_empty() {
            parts.push(format!("word {}", self.words.join(" or ")));
        }
        parts.join(", ")
    }
}

/// Whether `text` holds `domain` on its own, not as the tail of a longer
/// domain or the middle of a word.
fn names_domain(text: &str, domain: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
    text.match_indices(domain).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + domain.len()..].chars().next();
        !before.is_some_and(part) && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

/// `a.b.example.com` -> [`a.b.example.com`, `b.example.com`, `example.com`].
pub fn candidate_domains(domain: &str) -> Vec<String> {
    let labels: Vec<&str> = domain.split('.').collect();
    let min = if labels.len() >= 2 { 2 } else { 1 };
    (0..=labels.len() - min)
        .map(|i| labels[i..].join("."))
        .collect()
}

/// Lower-case alphanumeric runs: `quay.io/jetstack/cert-manager-controller:v1`
/// -> `quay io jetstack cert manager controller v1`.
fn tokens(s: &str) -> Vec<&str> {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_domains() {
        assert_eq!(
            candidate_domains("finalizers.kubesphere.io"),
            vec!["finalizers.kubesphere.io", "kubesphere.io"]
        );
        assert_eq!(candidate_domains("example.com"), vec!["example.com"]);
        assert_eq!(candidate_domains("localhost"), vec!["localhost"]);
    }

    #[test]
    fn product_words() {
        let t = OwnerWords::of("acme.cert-manager.io/finalizer", None);
        assert_eq!(t.domains, vec!["acme.cert-manager.io", "cert-manager.io"]);
        assert_eq!(t.words, vec!["acme", "cert-manager"]);
        let t = OwnerWords::of("resources-finalizer.argocd.argoproj.io", None);
        assert_eq!(t.words, vec!["argocd", "argoproj"]);
        // A shared parent is never a target of its own.
        let t = OwnerWords::of("widgets.example.k8s.io/x", None);
        assert_eq!(t.domains, vec!["widgets.example.k8s.io", "example.k8s.io"]);
        assert!(OwnerWords::of("my-finalizer", None).is_empty());
        assert_eq!(OwnerWords::of("strimzi", None).words, vec!["strimzi"]);
        let t = OwnerWords::of("orphan.unstuck.test/x", None);
        assert_eq!(t.words, vec!["orphan"]);
        assert_eq!(t.named_in("unstuck"), None);
    }

    #[test]
    fn matching_is_by_whole_tokens() {
        let t = OwnerWords::of("acme.cert-manager.io/finalizer", None);
        assert_eq!(
            t.named_in("quay.io/jetstack/cert-manager-controller:v1.16.1")
                .as_deref(),
            Some("word cert-manager")
        );
        assert_eq!(t.named_in("certificate-manager"), None);
        // A subdomain someone else chose is not the key's domain.
        let t = OwnerWords::of("example.com/removed-product", None);
        assert!(t.words.is_empty());
        assert_eq!(t.named_in("validate.policy.example.com"), None);
        assert_eq!(
            t.named_in("example.com/owner").as_deref(),
            Some("domain example.com")
        );
        let t = OwnerWords::of("pods.guard.example.com/protect", None);
        assert_eq!(t.words, vec!["guard"]);
        assert_eq!(t.named_in("validate.policy.example.com"), None);
        let t = OwnerWords::of("kiali.io/finalizer", None);
        assert_eq!(t.named_in("kiali-operator").as_deref(), Some("word kiali"));
        assert_eq!(t.named_in("kialiish"), None);
    }
}
