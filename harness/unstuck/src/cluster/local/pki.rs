//! The cluster's certificates and keys, made in-process with rcgen: a
//! cluster CA, a front-proxy CA for the aggregation layer, the apiserver's
//! serving certificate, one client certificate per component identity,
//! and the service-account signing key.

use std::{
    fs,
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
};

use crate::cluster::ClusterError;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// A client identity: the certificate's CN is the user, O the groups.
pub struct ClientIdentity {
    /// File stem under pki/ and of the kubeconfig.
    pub file: &'static str,
    pub user: String,
    pub groups: Vec<&'static str>,
}

/// The identities every local cluster needs.
pub fn client_identities(node_name: &str) -> Vec<ClientIdentity> {
    vec![
        ClientIdentity {
            file: "admin",
            user: "unstuck-admin".into(),
            groups: vec!["system:masters"],
        },
        ClientIdentity {
            file: "controller-manager",
            user: "system:kube-controller-manager".into(),
            groups: vec![],
        },
        ClientIdentity {
            file: "scheduler",
            user: "system:kube-scheduler".into(),
            groups: vec![],
        },
        ClientIdentity {
            file: "kubelet",
            user: format!("system:node:{node_name}"),
            groups: vec!["system:nodes"],
        },
        // The apiserver's identity towards kubelets (logs, exec).
        ClientIdentity {
            file: "apiserver-kubelet-client",
            user: "kube-apiserver".into(),
            groups: vec![],
        },
    ]
}

/// Paths of everything [`generate`] writes, relative to the pki directory.
pub struct PkiFiles {
    pub dir: PathBuf,
}

impl PkiFiles {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
    pub fn ca_cert(&self) -> PathBuf {
        self.path("ca.crt")
    }
}

struct Ca {
    params: CertificateParams,
    key: KeyPair,
}

impl Ca {
    fn new(common_name: &str) -> Result<Self, ClusterError> {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(common_name, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(gen_err(common_name))?;
        Ok(Self { params, key })
    }

    fn sign(
        &self,
        params: CertificateParams,
        what: &str,
    ) -> Result<(String, String), ClusterError> {
        let key = KeyPair::generate().map_err(gen_err(what))?;
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(gen_err(what))?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    fn self_signed_pem(&self) -> Result<String, ClusterError> {
        Ok(self
            .params
            .self_signed(&self.key)
            .map_err(gen_err("CA"))?
            .pem())
    }
}

fn gen_err(what: &str) -> impl Fn(rcgen::Error) -> ClusterError + '_ {
    move |source| ClusterError::PkiGenerate {
        what: what.to_string(),
        source,
    }
}

fn dn(common_name: &str, orgs: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    for o in orgs {
        dn.push(DnType::OrganizationName, *o);
    }
    dn
}

fn leaf(common_name: &str, orgs: &[&str], usage: ExtendedKeyUsagePurpose) -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name = dn(common_name, orgs);
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![usage];
    p
}

fn write(dir: &Path, name: &str, content: &str) -> Result<(), ClusterError> {
    let path = dir.join(name);
    fs::write(&path, content).map_err(|source| ClusterError::PkiWrite { path, source })
}

/// Writes the whole PKI of one cluster into `dir`.
pub fn generate(
    dir: &Path,
    node_name: &str,
    node_ip: Ipv4Addr,
    service_ip: Ipv4Addr,
) -> Result<PkiFiles, ClusterError> {
    fs::create_dir_all(dir).map_err(|source| ClusterError::PkiWrite {
        path: dir.to_path_buf(),
        source,
    })?;
    let ca = Ca::new("unstuck-ca")?;
    write(dir, "ca.crt", &ca.self_signed_pem()?)?;
    write(dir, "ca.key", &ca.key.serialize_pem())?;

    let mut serving = leaf("kube-apiserver", &[], ExtendedKeyUsagePurpose::ServerAuth);
    serving.subject_alt_names = [
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "localhost",
    ]
    .iter()
    .map(|n| SanType::DnsName((*n).try_into().expect("static DNS names are valid")))
    .chain(
        [Ipv4Addr::LOCALHOST, node_ip, service_ip]
            .into_iter()
            .map(|ip| SanType::IpAddress(IpAddr::V4(ip))),
    )
    .collect();
    let (crt, key) = ca.sign(serving, "apiserver serving certificate")?;
    write(dir, "apiserver.crt", &crt)?;
    write(dir, "apiserver.key", &key)?;

    for id in client_identities(node_name) {
        let (crt, key) = ca.sign(
            leaf(&id.user, &id.groups, ExtendedKeyUsagePurpose::ClientAuth),
            id.file,
        )?;
        write(dir, &format!("{}.crt", id.file), &crt)?;
        write(dir, &format!("{}.key", id.file), &key)?;
    }

    // The aggregation layer authenticates the apiserver to extension
    // servers with a separate CA; without these the apiserver does not
    // publish extension-apiserver-authentication and APIServices never work.
    let front = Ca::new("unstuck-front-proxy-ca")?;
    write(dir, "front-proxy-ca.crt", &front.self_signed_pem()?)?;
    let (crt, key) = front.sign(
        leaf(
            "front-proxy-client",
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
        ),
        "front-proxy-client",
    )?;
    write(dir, "front-proxy-client.crt", &crt)?;
    write(dir, "front-proxy-client.key", &key)?;

    let sa = KeyPair::generate().map_err(gen_err("service-account key"))?;
    write(dir, "sa.key", &sa.serialize_pem())?;
    write(dir, "sa.pub", &sa.public_key_pem())?;
    Ok(PkiFiles {
        dir: dir.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_every_file_the_components_read() {
        let dir = std::env::temp_dir().join(format!("unstuck-pki-test-{}", std::process::id()));
        generate(
            &dir,
            "n1",
            Ipv4Addr::new(10, 213, 0, 1),
            Ipv4Addr::new(10, 215, 0, 1),
        )
        .unwrap();
        for f in [
            "ca.crt",
            "ca.key",
            "apiserver.crt",
            "apiserver.key",
            "kubelet.crt",
            "admin.key",
            "front-proxy-ca.crt",
            "front-proxy-client.crt",
            "sa.key",
            "sa.pub",
        ] {
            let text = fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            assert!(text.starts_with("-----BEGIN "), "{f} is PEM");
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
