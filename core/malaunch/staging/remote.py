"""From a URL to an fsspec filesystem, with the endpoint and credentials of the environment.

``s3://`` and ``obs://`` (OBS through its S3-compatible API) go to s3fs, configured from the
environment mapping given (never ``os.environ`` directly):

=====================  =======================================================================
endpoint               ``obs://``: ``S3_ENDPOINT``, else ``AWS_ENDPOINT_URL_S3``,
                       ``AWS_ENDPOINT_URL``; ``s3://``: the AWS ones first, then ``S3_ENDPOINT``.
                       Without a scheme (``obs.cn-north-4.myhuaweicloud.com``) ``S3_USE_HTTPS``
                       picks it: ``0``/``false`` http, anything else https (the default).
TLS verification       ``S3_VERIFY_SSL=0`` (or ``false``) turns it off.
credentials            ``obs://``: ``ACCESS_KEY_ID`` + ``SECRET_ACCESS_KEY``, else
                       ``AWS_ACCESS_KEY_ID`` + ``AWS_SECRET_ACCESS_KEY`` (+ ``AWS_SESSION_TOKEN``);
                       ``s3://``: the AWS pair first. Neither: botocore's own chain (profiles,
                       ``~/.aws``, instance roles); nothing there is exit 66 naming the variables.
region                 ``AWS_REGION``, ``AWS_DEFAULT_REGION``; for OBS the endpoint's
                       (``obs.<region>.myhuaweicloud.com``).
=====================  =======================================================================

Every other scheme is whatever fsspec and the installed implementations make of the URL.
Retries are staging's own (:class:`malaunch.staging.models.RetryPolicy`): s3fs and botocore
are told to try once, so that a failure is not retried 5 x 5 times.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Dict, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from malaunch.errors import MissingInputError, UsageError

S3_SCHEMES = ("s3", "s3a", "obs")
INSTALL_S3 = "pip install 'malaunch[s3]'"
_FALSE = ("0", "false", "no", "off")
_OBS_REGION = re.compile(r"^obs\.([a-z0-9-]+)\.")


def scheme_of(url: str) -> str:
    """The URL's scheme, lower case; ``file`` for a plain path."""
    head, sep, _ = url.partition("://")
    return head.lower() if sep else "file"


def check_scheme(url: str, what: str) -> None:
    """Refuse a URL no installed fsspec implementation handles, before anything starts.

    :raises UsageError: unknown scheme, or its library not installed (which to install).
    """
    scheme = scheme_of(url)
    if scheme in S3_SCHEMES:
        _import_s3fs(what)
        return
    import fsspec  # noqa: PLC0415 (~40 ms: only a launch that stages pays it)

    try:
        fsspec.get_filesystem_class(scheme)
    except ValueError as exc:
        msg = f"{what}: unknown URL scheme {scheme!r}: no fsspec implementation is installed for it"
        raise UsageError(msg) from exc
    except ImportError as exc:
        msg = f"{what}: {scheme}:// needs a library that is not installed: {exc}"
        raise UsageError(msg) from exc


def open_filesystem(url: str, environ: Mapping[str, str]) -> Tuple[Any, str]:
    """(fsspec filesystem, path within it) for ``url``; S3 and OBS configured from ``environ``.

    :raises UsageError: unknown scheme or missing library (64).
    :raises MissingInputError: ``obs://`` without an endpoint variable (66).
    """
    check_scheme(url, url)
    scheme = scheme_of(url)
    if scheme in S3_SCHEMES:
        s3fs = _import_s3fs(url)
        fs = s3fs.S3FileSystem(**s3_options(scheme, environ))
        fs.retries = 1  # staging retries itself (a class attribute, not an argument)
        return fs, url.split("://", 1)[1]
    import fsspec  # noqa: PLC0415 (~40 ms: only a launch that stages pays it)

    fs, path = fsspec.core.url_to_fs(url)
    return fs, path


def _import_s3fs(what: str) -> Any:
    try:
        import s3fs  # noqa: PLC0415 (optional: the s3 extra)
    except ImportError as exc:
        msg = f"{what}: S3 and OBS URLs need the s3 extra: {INSTALL_S3}"
        raise UsageError(msg) from exc
    return s3fs


def _first(environ: Mapping[str, str], *names: str) -> Tuple[Optional[str], str]:
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return value, name
    return None, ""


def endpoint(scheme: str, environ: Mapping[str, str]) -> Optional[str]:
    """The endpoint URL for ``scheme`` (``None``: the library's default, AWS)."""
    aws = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
    names = ("S3_ENDPOINT", *aws) if scheme == "obs" else (*aws, "S3_ENDPOINT")
    value, _ = _first(environ, *names)
    if value is None:
        if scheme == "obs":
            msg = "obs:// URLs need S3_ENDPOINT (https://obs.<region>.myhuaweicloud.com)"
            raise MissingInputError(msg)
        return None
    if "://" not in value:
        https = environ.get("S3_USE_HTTPS", "1").strip().lower() not in _FALSE
        value = f"{'https' if https else 'http'}://{value}"
    return value


def credentials(scheme: str, environ: Mapping[str, str]) -> Dict[str, str]:
    """``key``/``secret``/``token`` for s3fs; empty: botocore's own chain.

    :raises MissingInputError: half a pair (the key without the secret, or the reverse).
    """
    pairs = [("ACCESS_KEY_ID", "SECRET_ACCESS_KEY"), ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")]
    if scheme != "obs":
        pairs.reverse()
    for key_name, secret_name in pairs:
        key, secret = environ.get(key_name, ""), environ.get(secret_name, "")
        if key and secret:
            found = {"key": key, "secret": secret}
            if key_name.startswith("AWS_") and environ.get("AWS_SESSION_TOKEN"):
                found["token"] = environ["AWS_SESSION_TOKEN"]
            return found
        if key or secret:
            missing, present = (secret_name, key_name) if key else (key_name, secret_name)
            msg = f"{missing} is not set ({present} is): both are needed for {scheme}:// URLs"
            raise MissingInputError(msg)
    return {}


def missing_credentials(scheme: str) -> str:
    """The message for "no credentials anywhere", naming the variables to set."""
    modelarts = "ACCESS_KEY_ID and SECRET_ACCESS_KEY"
    aws = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    first, then = (modelarts, aws) if scheme == "obs" else (aws, modelarts)
    return f"no credentials for {scheme}:// URLs: set {first} (or {then})"


def s3_options(scheme: str, environ: Mapping[str, str]) -> Dict[str, Any]:
    """The keyword arguments of ``s3fs.S3FileSystem`` for ``scheme`` and ``environ``."""
    url = endpoint(scheme, environ)
    client: Dict[str, Any] = {}
    region, _ = _first(environ, "AWS_REGION", "AWS_DEFAULT_REGION")
    host = urlsplit(url).hostname or "" if url else ""
    match = _OBS_REGION.match(host)
    if region is None and scheme == "obs" and match:
        region = match.group(1)
    if region:
        client["region_name"] = region
    if environ.get("S3_VERIFY_SSL", "1").strip().lower() in _FALSE:
        client["verify"] = False
    config: Dict[str, Any] = {
        "retries": {"max_attempts": 1, "mode": "standard"},
        "connect_timeout": 10,
        "read_timeout": 60,
        **_checksums_when_required(),
    }
    if scheme == "obs" and host and not _is_address(host):
        config["s3"] = {"addressing_style": "virtual"}  # OBS serves bucket.endpoint names
    return {
        "endpoint_url": url,
        "client_kwargs": client,
        "config_kwargs": config,
        "use_listings_cache": False,
        "skip_instance_cache": True,
        **credentials(scheme, environ),
    }


def _checksums_when_required() -> Dict[str, str]:
    """botocore 1.36+ adds a CRC32 to every upload and checks one on every download. Not
    every S3-compatible service (OBS among them) accepts the new headers, and the check costs
    about as much CPU as the transfer itself (``benchmarks/README.md``): ask for them only where
    an API requires them. Older botocore has neither option, nor the behaviour."""
    import botocore.config  # noqa: PLC0415 (the s3 extra's; only S3 and OBS URLs need it)

    if "request_checksum_calculation" not in botocore.config.Config.OPTION_DEFAULTS:
        return {}
    return {
        "request_checksum_calculation": "when_required",
        "response_checksum_validation": "when_required",
    }


def _is_address(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
