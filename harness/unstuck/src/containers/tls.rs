//! The certificates a backend serves and the caBundle its registration
//! trusts, made in-process with rcgen for each run. A TLS fault is a
//! real mismatch, not a flag: the apiserver's own verification fails.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::ContainerError;

/// How the serving certificate relates to the caBundle the registration
/// is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsFault {
    /// Signed by the CA in the caBundle, valid now.
    None,
    /// Signed by another CA (a certificate rotated without the caBundle
    /// following): `x509: certificate signed by unknown authority`.
    UnknownAuthority,
    /// Signed by the caBundle's CA but expired a day ago.
    Expired,
}

/// What a backend serves and what its registration trusts, as PEM.
#[derive(Clone, Debug)]
pub struct BackendTls {
    pub ca_bundle: String,
    pub cert: String,
    pub key: String,
}

struct Ca {
    params: CertificateParams,
    key: KeyPair,
}

fn err(what: &str) -> impl Fn(rcgen::Error) -> ContainerError + '_ {
    move |source| ContainerError::Certificate {
        what: what.to_string(),
        source,
    }
}

impl Ca {
    fn new(name: &str) -> Result<Self, ContainerError> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        Ok(Self {
            params,
            key: KeyPair::generate().map_err(err(name))?,
        })
    }

    fn pem(&self) -> Result<String, ContainerError> {
        Ok(self
            .params
            .self_signed(&self.key)
            .map_err(err("the CA"))?
            .pem())
    }
}

/// Certificates for a backend reached as `dns_names` (a Service's
/// `NAME.NAMESPACE.svc` for the apiserver), with `fault` built in.
pub fn backend_tls(dns_names: &[String], fault: TlsFault) -> Result<BackendTls, ContainerError> {
    let trusted = Ca::new("unstuck backend CA")?;
    let rotated;
    let signer = match fault {
        TlsFault::UnknownAuthority => {
            rotated = Ca::new("unstuck backend CA (rotated)")?;
            &rotated
        }
        TlsFault::None | TlsFault::Expired => &trusted,
    };
    let what = dns_names.first().map(String::as_str).unwrap_or("backend");
    let mut params = CertificateParams::new(dns_names.to_vec()).map_err(err(what))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, what);
    params.distinguished_name = dn;
    if fault == TlsFault::Expired {
        // rcgen's dates are `time`'s; built from the epoch so as not to
        // depend on that crate for one subtraction.
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let now = rcgen::date_time_ymd(1970, 1, 1) + since_epoch;
        params.not_before = now - std::time::Duration::from_secs(30 * 86_400);
        params.not_after = now - std::time::Duration::from_secs(86_400);
    }
    let key = KeyPair::generate().map_err(err(what))?;
    let issuer = Issuer::from_params(&signer.params, &signer.key);
    let cert = params.signed_by(&key, &issuer).map_err(err(what))?;
    Ok(BackendTls {
        ca_bundle: trusted.pem()?,
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}
