"""Who may talk to a fleet: TLS with a certificate authority of the fleet's own.

A Dask worker runs whatever function a client sends it (pickled code), and a
blocklab worker runs as the user who owns the host's engines (root here). So
anyone who can reach the scheduler as a client owns every host of the fleet.
The scheduler, the workers and the coordinator therefore talk only TLS, each
side proving itself with a certificate signed by the fleet's CA (Dask checks
both directions: `Security` sets CERT_REQUIRED), and plain TCP is refused;
`--insecure` allows plain TCP for a try on one machine, and only on loopback.

    blocklab fleet certs DIR       ca.pem, ca-key.pem, and a cert/key pair per role
    load_security("worker", DIR)   the distributed.Security a worker runs with

Roles are Dask's: the scheduler listens, workers listen and connect, the client
(blocklab run --fleet, fleet status) connects. ca-key.pem only signs: keep it
off the fleet's hosts.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from . import FleetInputError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from distributed import Security

ROLES = ("scheduler", "worker", "client")
CA_CERT = "ca.pem"
CA_KEY = "ca-key.pem"
CERTS_ENV = "BLOCKLAB_FLEET_CERTS"  # the --certs default, so one export serves every command on a host
DEFAULT_PORT = 8786  # Dask's scheduler port
VALID_DAYS = 825  # the longest server-certificate lifetime common TLS clients still accept


def cert_file(role: str) -> str:
    return f"{role}.pem"


def key_file(role: str) -> str:
    return f"{role}-key.pem"


# ---------------------------------------------------------------------- making the CA
def make_certs(directory: Path, *, days: int = VALID_DAYS, now: dt.datetime | None = None) -> list[Path]:
    """A new CA and one certificate per role, signed by it, written into `directory`
    (created, mode 0700; keys 0600). Refuses a directory that already holds any of
    the files: a second CA would silently lock the running fleet out."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    names = [CA_CERT, CA_KEY, *(f(r) for r in ROLES for f in (cert_file, key_file))]
    taken = [n for n in names if (directory / n).exists()]
    if taken:
        raise FleetInputError("DIR", f"{directory} already holds {', '.join(taken)}; give a new or empty directory "
                              "(a new CA would lock out every host that holds the old one)")
    if directory.exists() and not directory.is_dir():
        raise FleetInputError("DIR", f"{directory} exists and is not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as err:
        raise FleetInputError("DIR", f"{directory}: cannot create it: {err.strerror or err}") from None

    start = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(minutes=5)  # a host whose clock is a little behind
    end = start + dt.timedelta(days=days)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "blocklab fleet"), x509.NameAttribute(NameOID.COMMON_NAME, common)])

    # P-256 keys: as strong as RSA-3072 for TLS here, and made in milliseconds
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name(f"blocklab fleet CA {start:%Y-%m-%d}")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    written = [_write(directory / CA_CERT, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644),
               _write(directory / CA_KEY, _key_pem(ca_key), 0o600)]
    for role in ROLES:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(f"blocklab-{role}")).issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            # Dask connects by IP address and checks the chain, not the name (check_hostname
            # is off); the name is there for people reading the certificate
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(f"blocklab-{role}")]), critical=False)
            # workers and the scheduler both listen and connect: each side may play either part
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        written.append(_write(directory / cert_file(role), cert.public_bytes(serialization.Encoding.PEM), 0o644))
        written.append(_write(directory / key_file(role), _key_pem(key), 0o600))
    return written


def _key_pem(key: EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def _write(path: Path, data: bytes, mode: int) -> Path:
    # created with its final mode: a private key is never readable by others, not even for a moment
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


# ---------------------------------------------------------------------- using it
def certs_dir(given: Path | None, insecure: bool) -> Path | None:
    """--certs DIR, else $BLOCKLAB_FLEET_CERTS; None with --insecure (plain TCP)."""
    if insecure:
        if given is not None:
            raise FleetInputError("--insecure", "plain TCP takes no certificates; drop --certs, or drop --insecure to use TLS")
        return None
    if given is None and os.environ.get(CERTS_ENV):
        given = Path(os.environ[CERTS_ENV])
    if given is None:
        raise FleetInputError(
            "--certs", "a fleet talks TLS: give the directory `blocklab fleet certs DIR` wrote (or set "
            f"{CERTS_ENV}=DIR), or --insecure for a try on this one machine (loopback only)")
    return given


def load_security(role: str, directory: Path | None) -> Security | None:
    """The distributed.Security for one role with the CA and that role's pair from
    `directory`; None for --insecure. Refuses missing files, a certificate the CA
    did not sign, an expired one, naming the file."""
    if directory is None:
        return None
    from cryptography import x509

    if not directory.is_dir():
        raise FleetInputError("--certs", f"{directory} is not a directory; make one with `blocklab fleet certs {directory}`")
    paths = {"ca": directory / CA_CERT, "cert": directory / cert_file(role), "key": directory / key_file(role)}
    for path in paths.values():
        if not path.is_file():
            raise FleetInputError("--certs", f"{path} is missing: a {role} needs {CA_CERT}, {cert_file(role)} and {key_file(role)} "
                                  f"from `blocklab fleet certs`")
    try:
        ca = x509.load_pem_x509_certificate(paths["ca"].read_bytes())
        cert = x509.load_pem_x509_certificate(paths["cert"].read_bytes())
    except (OSError, ValueError) as err:
        raise FleetInputError("--certs", f"{directory}: cannot read the certificates: {err}") from None
    try:
        cert.verify_directly_issued_by(ca)
    except Exception as err:  # cryptography's InvalidSignature is no ValueError
        raise FleetInputError("--certs", f"{paths['cert']} was not signed by {paths['ca']} ({type(err).__name__}); "
                              "give the files of one `blocklab fleet certs` directory") from None
    now = dt.datetime.now(dt.UTC)
    if cert.not_valid_after_utc < now:
        raise FleetInputError("--certs", f"{paths['cert']} expired on {cert.not_valid_after_utc:%Y-%m-%d}; make new ones with `blocklab fleet certs`")
    from distributed import Security

    fields = {"tls_ca_file": str(paths["ca"]), f"tls_{role}_cert": str(paths["cert"]), f"tls_{role}_key": str(paths["key"])}
    return Security(require_encryption=True, **fields)


# ---------------------------------------------------------------------- addresses
def check_address(option: str, address: str, insecure: bool, *, listening: bool = False) -> str:
    """The address with its scheme: tls:// by default, tcp:// only with --insecure and
    only on loopback. Anything else is a FleetInputError naming `option`."""
    text = address.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = ("tcp" if insecure else "tls"), text
    scheme = scheme.lower()
    host, port = split_host_port(option, rest, allow_any_port=listening)
    if scheme not in ("tls", "tcp"):
        raise FleetInputError(option, f"{address!r}: a fleet address is tls://HOST:PORT (or tcp://127.0.0.1:PORT with --insecure)")
    if scheme == "tcp" and not insecure:
        raise FleetInputError(option, f"{address!r} is plain TCP, which a fleet refuses: a Dask worker runs whatever a client "
                              "sends it. Use tls://HOST:PORT with --certs DIR, or add --insecure for a try on one machine (loopback only)")
    if scheme == "tls" and insecure:
        raise FleetInputError(option, f"{address!r} is TLS but --insecure was given: use tcp://127.0.0.1:PORT with --insecure, or drop --insecure")
    if insecure and not is_loopback(host):
        raise FleetInputError(option, f"{address!r}: --insecure (plain TCP) is only for a try on one machine: give a loopback "
                              "address such as 127.0.0.1, or use TLS (blocklab fleet certs DIR)")
    if not listening and host in ("", "0.0.0.0", "::"):
        raise FleetInputError(option, f"{address!r}: give the scheduler's host name or IP address, not the wildcard")
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def split_host_port(option: str, text: str, *, allow_any_port: bool = False) -> tuple[str, int]:
    """('host', port) of 'host:port' or '[v6]:port' (the default port when none is given;
    port 0, any free port, only where blocklab listens)."""
    if text.startswith("["):  # [::1]:8786
        host, _, tail = text[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else ""
    else:
        host, _, port_text = text.rpartition(":") if ":" in text else (text, "", "")
    if not port_text:
        port_text = str(DEFAULT_PORT)
    lowest = 0 if allow_any_port else 1
    if not port_text.isdigit() or not lowest <= int(port_text) < 65536:
        raise FleetInputError(option, f"{text!r}: the port must be a number from {lowest} to 65535")
    return host, int(port_text)


def is_loopback(host: str) -> bool:
    """Does `host` (an address or a name) reach only this machine?"""
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


# Dask also starts a plain-HTTP server beside every scheduler and worker (its
# dashboard routes: worker lists, call stacks, metrics), outside TLS. A fleet
# keeps only the health check, on the address the node itself listens on.
HTTP_CONFIG = {
    "distributed.scheduler.http.routes": ["distributed.http.health"],
    "distributed.worker.http.routes": ["distributed.http.health"],
}


def quiet_logs(verbose: bool = False) -> None:
    """Dask logs every connection at INFO on each of its loggers; a person reads
    blocklab's own lines (-v keeps Dask's)."""
    import logging

    import distributed  # noqa: F401 - its import configures the loggers this then quiets

    level = logging.INFO if verbose else logging.WARNING
    for name in list(logging.root.manager.loggerDict):
        if name == "distributed" or name.startswith("distributed."):
            logging.getLogger(name).setLevel(level)
