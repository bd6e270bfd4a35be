"""What a job folder records about its render (generator/record.py), read back as data: never through a link, at
most MAX_BYTES, trusted only under an intact MANIFEST that lists its sha256, refused key by key with the key named.
The mutation run of issue 42 (bench/mutants.py) found these refusals unchecked by the workflow tests."""

from __future__ import annotations

import json
import os

import pytest

from generator import record
from generator.errors import UserError
from generator.jobdir import MANIFEST, manifest_text
from generator.plan import MadeFrom
from generator.record import PLAN_JSON, RecordError, read_record, spec_key
from generator.spec import bad_override


def job_folder(tmp_path, document, manifest_of=None):
    """OUT/job holding plan.json (`document` as JSON, or bytes as given) and a MANIFEST render would write for
    `manifest_of` (default: plan.json as written)."""
    folder = tmp_path / "out" / "job"
    folder.mkdir(parents=True)
    text = document.decode() if isinstance(document, bytes) else json.dumps(document)
    (folder / PLAN_JSON).write_text(text)
    (folder / MANIFEST).write_text(manifest_text(["# test"], {PLAN_JSON: text if manifest_of is None else manifest_of}))
    return folder


def test_a_record_render_wrote_is_read_back_whole(tmp_path):
    made = {"spec_file": "specs/a.yaml", "overrides": ["train.steps=10", "seq_len=8192"], "force": True}
    assert read_record(job_folder(tmp_path, {"made_from": made})) == \
        MadeFrom("specs/a.yaml", ("train.steps=10", "seq_len=8192"), True)


def test_the_record_defaults_are_nothing_recorded(tmp_path):
    assert read_record(job_folder(tmp_path, {"made_from": {}})) == MadeFrom(None, (), False)
    assert read_record(job_folder(tmp_path / "old", {"plan": "from a version before made_from"})) == MadeFrom()


def test_no_folder_no_plan_json_or_a_linked_folder_records_nothing(tmp_path):
    assert read_record(tmp_path / "missing") is None
    (tmp_path / "empty").mkdir()
    assert read_record(tmp_path / "empty") is None
    folder = job_folder(tmp_path, {"made_from": {"force": True}})
    (tmp_path / "linked").symlink_to(folder)
    assert read_record(tmp_path / "linked") is None


def test_a_plan_json_that_is_a_link_or_too_large_is_refused(tmp_path, monkeypatch):
    folder = job_folder(tmp_path, {"made_from": {}, "values": "x" * 400})  # larger than its MANIFEST
    data = (folder / PLAN_JSON).read_bytes()
    monkeypatch.setattr(record, "MAX_BYTES", len(data))
    assert read_record(folder) == MadeFrom()  # exactly the limit: read
    monkeypatch.setattr(record, "MAX_BYTES", len(data) - 1)
    with pytest.raises(RecordError, match="is not a regular file of at most"):
        read_record(folder)
    monkeypatch.undo()
    (tmp_path / "elsewhere.json").write_bytes(data)
    (folder / PLAN_JSON).unlink()
    (folder / PLAN_JSON).symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(RecordError, match="is not a regular file"):
        read_record(folder)


def test_plan_json_is_read_up_to_16_mib(tmp_path):
    assert record.MAX_BYTES == 16 * 2**20
    folder = job_folder(tmp_path, {"made_from": {}, "values": "x" * (16 * 2**20 - 40)})
    assert (folder / PLAN_JSON).stat().st_size == 16 * 2**20 - 40 + len('{"made_from": {}, "values": ""}')
    assert read_record(folder) == MadeFrom()
    with (folder / PLAN_JSON).open("a") as grown:
        grown.write(" " * 10)  # 16 MiB + 1: refused before MANIFEST's hash is even compared
    with pytest.raises(RecordError, match="is not a regular file of at most 16,777,216 bytes"):
        read_record(folder)


def test_a_missing_manifest_is_refused(tmp_path):
    folder = job_folder(tmp_path, {"made_from": {}})
    (folder / MANIFEST).unlink()
    with pytest.raises(RecordError, match=r"cannot be checked: .*MANIFEST is missing"):
        read_record(folder)


def test_a_broken_seal_is_refused_though_it_lists_the_right_sha256(tmp_path):
    folder = job_folder(tmp_path, {"made_from": {"force": True}})
    manifest = (folder / MANIFEST).read_text()
    (folder / MANIFEST).write_text(manifest.replace("# test", "# edited"))
    with pytest.raises(RecordError, match="cannot be trusted: .*was edited by hand"):
        read_record(folder)


def test_a_plan_json_edited_since_render_is_refused(tmp_path):
    folder = job_folder(tmp_path, {"made_from": {"force": True}}, manifest_of=json.dumps({"made_from": {}}))
    with pytest.raises(RecordError, match="was edited by hand since render wrote it"):
        read_record(folder)


@pytest.mark.parametrize("document,words", [
    (b"{not json", "is not JSON text"),
    (b"[1, 2]", "expected a JSON object"),
    ({"made_from": []}, "made_from: expected a mapping"),
    ({"made_from": {"spec_file": 3}}, "made_from.spec_file: expected a path in printable text or null"),
    ({"made_from": {"spec_file": "a\x1b[2J.yaml"}}, "made_from.spec_file: expected a path"),
    ({"made_from": {"overrides": "a=1"}}, "made_from.overrides: expected a list of KEY.PATH=VALUE strings"),
    ({"made_from": {"overrides": ["a=1", 2]}}, "made_from.overrides: expected a list"),
    ({"made_from": {"overrides": ["a=1", "b=\n2"]}}, "made_from.overrides: .* holds a control"),
    ({"made_from": {"force": "yes"}}, "made_from.force: expected true or false"),
    ({"made_from": {"force": 1}}, "made_from.force: expected true or false"),
])
def test_a_record_that_is_not_what_render_writes_is_refused_at_its_key(tmp_path, document, words):
    folder = job_folder(tmp_path, document)
    with pytest.raises(RecordError, match=words):
        read_record(folder)


def test_a_record_refusal_is_a_user_error_with_no_traceback_for_the_cli():
    assert issubclass(RecordError, UserError)


def test_the_spec_key_is_its_path_from_the_folder_that_holds_out(tmp_path, monkeypatch):
    (tmp_path / "repo" / "specs").mkdir(parents=True)
    (tmp_path / "repo" / "out").mkdir()
    monkeypatch.chdir(tmp_path / "repo" / "specs")
    assert spec_key("a.yaml", tmp_path / "repo" / "out") == "specs/a.yaml"
    assert spec_key(str(tmp_path / "other.yaml"), tmp_path / "repo" / "out") == "../other.yaml"
    os.symlink(tmp_path / "repo", tmp_path / "via")  # a checkout reached through a link: the same key
    assert spec_key(str(tmp_path / "via" / "specs" / "a.yaml"), tmp_path / "repo" / "out") == "specs/a.yaml"
    with pytest.raises(UserError, match="holds a control or other non-printing character"):
        spec_key("a\x07.yaml", tmp_path / "repo" / "out")


def test_the_first_override_that_is_not_plain_text_is_named():
    assert bad_override(("a=1", "b=2")) is None
    assert bad_override(("a=1", "b=\x1b", "c=\t")) == "b=\x1b"
    assert bad_override(()) is None
