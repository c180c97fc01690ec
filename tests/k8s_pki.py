"""The PKI of the Kubernetes test cluster (tests/k8s_cluster.py): certificates made with openssl, a kubeconfig.

A CA signs the apiserver's serving certificate (loopback and the in-cluster names) and an admin client
certificate in group system:masters; the service accounts get an RSA signing pair. openssl makes them
in a fraction of a second, so every cluster gets its own.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml


class PkiError(RuntimeError):
    """openssl failed; the message has its error."""


@dataclass(frozen=True)
class Certificates:
    """The PKI of one cluster: a CA, the apiserver's serving pair, an admin client pair, the
    service-account signing pair. All files, in one directory."""

    ca: Path
    ca_key: Path
    apiserver: Path
    apiserver_key: Path
    admin: Path
    admin_key: Path
    service_account_key: Path
    service_account_pub: Path


APISERVER_SANS = ("DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default", "DNS:kubernetes.default.svc",
                  "DNS:kubernetes.default.svc.cluster.local", "IP:127.0.0.1", "IP:10.96.0.1")
"""Loopback, the in-cluster names, and the first address of --service-cluster-ip-range."""


def _openssl(*args: str) -> None:
    done = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0:
        raise PkiError(f"openssl {' '.join(args[:2])} failed: {done.stderr.strip()[-1000:]}")


def make_certificates(directory: Path) -> Certificates:
    """Create the cluster's certificates and keys with openssl (EC P-256 for TLS; RSA for service accounts)."""
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    certs = Certificates(d / "ca.crt", d / "ca.key", d / "apiserver.crt", d / "apiserver.key", d / "admin.crt",
                         d / "admin.key", d / "service-account.key", d / "service-account.pub")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", str(certs.ca_key), "-out", str(certs.ca), "-days", "30",
             "-subj", "/CN=bench-plugin-test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    leaves = ((certs.apiserver, certs.apiserver_key, "/CN=kube-apiserver",
               f"subjectAltName={','.join(APISERVER_SANS)}\nextendedKeyUsage=serverAuth\n"),
              (certs.admin, certs.admin_key, "/O=system:masters/CN=admin", "extendedKeyUsage=clientAuth\n"))
    for cert, key, subject, extensions in leaves:
        request, extfile = cert.with_suffix(".csr"), cert.with_suffix(".ext")
        extfile.write_text("keyUsage=critical,digitalSignature,keyEncipherment\n" + extensions)
        _openssl("req", "-new", *ec, "-keyout", str(key), "-out", str(request), "-subj", subject)
        _openssl("x509", "-req", "-in", str(request), "-CA", str(certs.ca), "-CAkey", str(certs.ca_key),
                 "-set_serial", f"0x{secrets.token_hex(8)}", "-days", "30", "-extfile", str(extfile),
                 "-out", str(cert))
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(certs.service_account_key))
    _openssl("pkey", "-in", str(certs.service_account_key), "-pubout", "-out", str(certs.service_account_pub))
    return certs


def write_kubeconfig(path: Path, server: str, certs: Certificates) -> None:
    """A kubeconfig for the admin user (O=system:masters) of the cluster at ``server``."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server, "certificate-authority": str(certs.ca)}}],
        "users": [{"name": "admin", "user": {"client-certificate": str(certs.admin),
                                             "client-key": str(certs.admin_key)}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
    }))
