"""URL schemes, and S3/OBS endpoints and credentials from the environment."""

from __future__ import annotations

import re
import sys
from typing import Dict

import pytest

from malaunch.errors import ExitCode, MissingInputError, UsageError
from malaunch.staging import INSTALL_S3, check_scheme, open_filesystem
from malaunch.staging.remote import s3_options

MA = {
    "S3_ENDPOINT": "obs.cn-north-4.myhuaweicloud.com",
    "ACCESS_KEY_ID": "ma-key",
    "SECRET_ACCESS_KEY": "ma-secret",
}
AWS = {"AWS_ACCESS_KEY_ID": "aws-key", "AWS_SECRET_ACCESS_KEY": "aws-secret"}


def test_obs_takes_the_modelarts_variables_first() -> None:
    options = s3_options("obs", {**MA, **AWS, "AWS_ENDPOINT_URL": "http://elsewhere"})
    assert options["endpoint_url"] == "https://obs.cn-north-4.myhuaweicloud.com"
    assert (options["key"], options["secret"]) == ("ma-key", "ma-secret")
    assert options["client_kwargs"] == {"region_name": "cn-north-4"}
    assert options["config_kwargs"]["s3"] == {"addressing_style": "virtual"}
    assert options["use_listings_cache"] is False


def test_s3_takes_the_aws_variables_first() -> None:
    env = {**MA, **AWS, "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_SESSION_TOKEN": "t"}
    options = s3_options("s3", env)
    assert options["endpoint_url"] == "http://127.0.0.1:9000"
    assert (options["key"], options["secret"], options["token"]) == ("aws-key", "aws-secret", "t")
    assert "s3" not in options["config_kwargs"]
    assert s3_options("s3", {})["endpoint_url"] is None  # AWS itself
    assert s3_options("s3", MA)["key"] == "ma-key"  # the ModelArts pair as a fallback


@pytest.mark.parametrize(
    ("env", "endpoint", "verify"),
    [
        ({"S3_ENDPOINT": "h:9000", "S3_USE_HTTPS": "0"}, "http://h:9000", None),
        ({"S3_ENDPOINT": "h", "S3_USE_HTTPS": "false"}, "http://h", None),
        ({"S3_ENDPOINT": "h", "S3_USE_HTTPS": "1"}, "https://h", None),
        ({"S3_ENDPOINT": "h"}, "https://h", None),
        # a scheme in the endpoint wins (ModelArts users write https://... with S3_USE_HTTPS=0)
        ({"S3_ENDPOINT": "https://h", "S3_USE_HTTPS": "0"}, "https://h", None),
        ({"S3_ENDPOINT": "h", "S3_VERIFY_SSL": "0"}, "https://h", False),
        ({"AWS_ENDPOINT_URL_S3": "http://a", "AWS_ENDPOINT_URL": "http://b"}, "http://a", None),
    ],
)
def test_endpoint_scheme_and_verification(
    env: Dict[str, str], endpoint: str, verify: object
) -> None:
    options = s3_options("obs", env)
    assert options["endpoint_url"] == endpoint
    assert options["client_kwargs"].get("verify") == verify


def test_obs_without_an_endpoint_is_66_naming_the_variable() -> None:
    with pytest.raises(MissingInputError, match="S3_ENDPOINT") as caught:
        s3_options("obs", {**MA, "S3_ENDPOINT": ""})
    assert caught.value.exit_code == ExitCode.NO_INPUT


@pytest.mark.parametrize(
    ("scheme", "env", "message"),
    [
        ("obs", {**MA, "SECRET_ACCESS_KEY": ""}, "SECRET_ACCESS_KEY is not set (ACCESS_KEY_ID is)"),
        ("s3", {"AWS_SECRET_ACCESS_KEY": "s"}, "AWS_ACCESS_KEY_ID is not set"),
    ],
)
def test_half_a_credential_pair_is_66(scheme: str, env: Dict[str, str], message: str) -> None:
    with pytest.raises(MissingInputError, match=re.escape(message)):
        s3_options(scheme, {"S3_ENDPOINT": "h", **env})


def test_no_credentials_leaves_them_to_botocore() -> None:
    assert "key" not in s3_options("s3", {})


def test_unknown_scheme_is_64_and_a_missing_library_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(UsageError, match="unknown URL scheme 'nosuch'") as caught:
        check_scheme("nosuch://x", "--stage-in d=nosuch://x")
    assert caught.value.exit_code == ExitCode.USAGE
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if the s3 extra were not installed
    for url in ("s3://b/k", "obs://b/k"):
        with pytest.raises(UsageError) as missing:
            open_filesystem(url, MA)
        assert str(missing.value) == f"{url}: S3 and OBS URLs need the s3 extra: {INSTALL_S3}"


def test_local_paths_and_file_urls(tmp_path: object) -> None:
    fs, path = open_filesystem(f"file://{tmp_path}/x", {})
    assert "file" in fs.protocol and path == f"{tmp_path}/x"
    fs, path = open_filesystem(f"{tmp_path}/y", {})
    assert path == f"{tmp_path}/y"
