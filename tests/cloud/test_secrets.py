"""Runtime Cloud's official SDK (withruntime 0.35.0 from PyPI, unmodified) against
runtimed: `runtime.secrets` set, list, replace and delete through /v1/egress-secrets,
and the refusals that name what runtimed cannot do. The delete goes through the SDK's
own look for a jobs copy first (GET /v1/secrets), which runtimed answers 501
unavailable. What the proxy then does with a secret is tests/secrets' to show."""

from __future__ import annotations

import json
import urllib.request

import pytest
import withruntime

from conftest import Daemon

VALUE = "ghp_cloud_sdk_value_0123456789"


def raw(daemon: Daemon, method: str, path: str) -> tuple[int, dict]:
    """One request outside the SDK, for what its answer drops (the status of a 501)."""
    req = urllib.request.Request(daemon.url + path, method=method,
                                 headers={"Authorization": f"Bearer {daemon.key}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_set_list_replace_and_delete(runtime: withruntime.Runtime) -> None:
    saved = runtime.secrets.set(
        "GH_SDK", value=VALUE, hosts=["api.github.com"], header="Authorization",
        format="token {value}", env="GITHUB_TOKEN",
        rules=[{"methods": ["GET"], "paths": ["/repos/*"]}, {"methods": ["POST"], "paths": ["/issues"]}])
    assert saved["name"] == "GH_SDK"
    assert saved["hosts"] == ["api.github.com"]
    assert (saved["header"], saved["format"], saved["env"]) == ("Authorization", "token {value}", "GITHUB_TOKEN")
    assert saved["rules"] == [{"methods": ["GET"], "paths": ["/repos/*"]},
                              {"methods": ["POST"], "paths": ["/issues"]}]
    placeholder = saved["placeholder"]
    assert placeholder.startswith("RUNTIME_PH_")
    assert VALUE not in json.dumps(saved)

    listed = {s["name"]: s for s in runtime.secrets.list()}
    assert listed["GH_SDK"]["placeholder"] == placeholder
    assert listed["GH_SDK"]["hosts"] == ["api.github.com"]
    assert VALUE not in json.dumps(list(listed.values()))
    assert "value" not in listed["GH_SDK"]

    # Replacing keeps the placeholder; without rules they are cleared; env stays.
    again = runtime.secrets.set("GH_SDK", value=VALUE + "2", hosts=["api.github.com"])
    assert again["placeholder"] == placeholder
    assert "rules" not in again and "header" not in again
    assert again["env"] == "GITHUB_TOKEN"

    gone = runtime.secrets.delete("GH_SDK")
    assert gone["deleted"] is True and gone["from"] == ["sandboxes"]
    assert "GH_SDK" not in {s["name"] for s in runtime.secrets.list()}


def test_list_pages_follow_next(runtime: withruntime.Runtime, daemon: Daemon) -> None:
    names = [f"PAGE_{i}" for i in range(3)]
    for n in names:
        runtime.secrets.set(n, value="v" * 8, hosts=["example.com"])
    first = runtime.secrets.list(limit=2)
    assert [s["name"] for s in first] == names[:2]
    rest = runtime.secrets.list(after=names[1])
    assert [s["name"] for s in rest][:1] == names[2:]
    assert set(names) <= {s["name"] for s in runtime.secrets.list()}
    for n in names:
        runtime.secrets.delete(n)


def test_delete_of_a_missing_name_is_not_found(runtime: withruntime.Runtime) -> None:
    with pytest.raises(withruntime.NotFoundError):
        runtime.secrets.delete("NO_SUCH_SECRET")


def test_jobs_secrets_are_unavailable_here(daemon: Daemon) -> None:
    for method, path in (("GET", "/v1/secrets?limit=100"), ("GET", "/v1/secrets/x"),
                         ("PUT", "/v1/secrets/GH"), ("DELETE", "/v1/secrets/GH")):
        status, body = raw(daemon, method, path)
        assert status == 501, (method, path, body)
        assert body["error"]["code"] == "unavailable"
        assert "/v1/egress-secrets" in body["error"]["message"]


def test_every_wrong_field_is_named(runtime: withruntime.Runtime) -> None:
    with pytest.raises(withruntime.InvalidRequestError) as e:
        runtime.secrets.set("BAD", value="v", hosts=["api.github.com"], git={"push": []},
                            github_app={"id": 1, "installation": 2}, api={"keep": 1},
                            format="no placeholder")
    err = e.value
    assert err.code == "invalid_request" and err.status == 400
    for field in ("git", "githubApp", "api", "format"):
        assert field in err.message, err.message
    assert "not available in runtimed" in err.message
    fields = {i["field"] for i in err.details["issues"]}
    assert {"git", "githubApp", "api", "format"} <= fields
    assert "BAD" not in {s["name"] for s in runtime.secrets.list()}


def test_unknown_field_is_refused_by_name(runtime: withruntime.Runtime, daemon: Daemon) -> None:
    req = urllib.request.Request(
        daemon.url + "/v1/egress-secrets/ODD", method="PUT",
        data=json.dumps({"value": "v", "hosts": ["example.com"], "colour": "red"}).encode(),
        headers={"Authorization": f"Bearer {daemon.key}", "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    body = json.loads(e.value.read())
    assert e.value.code == 400 and body["error"]["code"] == "invalid_request"
    assert "colour" in body["error"]["message"]


def test_seventeen_rules_are_refused(runtime: withruntime.Runtime) -> None:
    rules = [{"paths": [f"/r{i}"]} for i in range(17)]
    with pytest.raises(withruntime.InvalidRequestError) as e:
        runtime.secrets.set("MANY", value="v", hosts=["example.com"], rules=rules)
    assert "rules" in e.value.message and "16" in e.value.message
    runtime.secrets.set("MANY", value="v", hosts=["example.com"], rules=rules[:16])
    runtime.secrets.delete("MANY")


def test_only_apps_is_refused_and_sandboxes_and_labels_kept(runtime: withruntime.Runtime) -> None:
    with pytest.raises(withruntime.InvalidRequestError) as e:
        runtime.secrets.set("SCOPED", value="v", hosts=["example.com"], only={"apps": ["app_1"]})
    assert "only.apps" in e.value.message and "not available in runtimed" in e.value.message
    only = {"labels": [{"team": "a"}], "sandboxes": ["sbx_1"]}
    saved = runtime.secrets.set("SCOPED", value="v", hosts=["example.com"], only=only)
    assert saved["only"] == only
    # Replacing without only keeps the scope: a new value never widens who gets it.
    assert runtime.secrets.set("SCOPED", value="w", hosts=["example.com"])["only"] == only
    assert "only" not in runtime.secrets.set("SCOPED", value="w", hosts=["example.com"], only={})
    runtime.secrets.delete("SCOPED")


def test_placeholder_in_a_sandbox_under_env(runtime: withruntime.Runtime) -> None:
    runtime.secrets.set("ENV_SDK", value=VALUE, hosts=["api.github.com"], env="MY_TOKEN")
    try:
        with runtime.sandboxes.create() as sbx:
            r = sbx.exec("printf '%s|%s' \"$MY_TOKEN\" \"${ENV_SDK-unset}\"", check=True)
            token, plain = r.stdout.split("|")
            assert token.startswith("RUNTIME_PH_") and VALUE not in r.stdout
            assert plain == "unset"
    finally:
        runtime.secrets.delete("ENV_SDK")
