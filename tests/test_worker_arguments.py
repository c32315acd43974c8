"""Bad command-line values are refused by argparse: exit status 2, a message naming the
option, no traceback (issue 33, defect 7). The rules are validation.seconds's."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command, load_command_class

from tests.workers import run_manage


def refused(*args: str) -> str:
    """The message of the refusal (call_command turns argparse's exit into CommandError)."""
    with pytest.raises(CommandError) as refusal:
        call_command(*args)
    return str(refusal.value)


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400", "-1", "0", "soon"])
def test_alk_worker_refuses_a_poll_interval_that_is_not_a_positive_finite_duration(value):
    assert "argument --poll-interval: " in refused("alk_worker", "--poll-interval", value)


@pytest.mark.parametrize("value", ["inf", "nan", "-0.5", "later"])
def test_alk_worker_refuses_a_shutdown_timeout_that_is_not_a_finite_duration(value):
    assert "argument --shutdown-timeout: " in refused("alk_worker", "--shutdown-timeout", value)


@pytest.mark.parametrize("value", ["inf", "nan", "-0.5", "later"])
def test_alk_worker_refuses_a_kill_grace_that_is_not_a_finite_duration(value):
    assert "argument --kill-grace: " in refused("alk_worker", "--kill-grace", value)


def test_alk_worker_refuses_a_pool_other_than_thread_or_process():
    assert "argument --pool: invalid choice: 'fibers'" in refused("alk_worker", "--pool", "fibers")


@pytest.mark.parametrize(
    "option", ["--concurrency", "--processes", "--batch", "--max-jobs", "--max-jobs-per-child"]
)
@pytest.mark.parametrize("value", ["0", "-3", "2.5", "many"])
def test_alk_worker_refuses_a_count_below_one_or_not_whole(option, value):
    assert f"argument {option}: " in refused("alk_worker", option, value)


def parsed(command: str, *args: str) -> dict[str, object]:
    """The options `args` parse to, without running the command (a bound that is missing
    must not start a hundred thousand processes to show it)."""
    parser = load_command_class("django_alkqueue", command).create_parser("manage.py", command)
    return vars(parser.parse_args(args))


def refused_by_the_parser(command: str, *args: str) -> str:
    with pytest.raises(CommandError) as refusal:
        parsed(command, *args)
    return str(refusal.value)


@pytest.mark.parametrize(
    ("option", "most"), [("--processes", 256), ("--concurrency", 1024), ("--batch", 100_000)]
)
def test_alk_worker_refuses_a_count_above_its_bound(option, most):
    message = refused_by_the_parser("alk_worker", option, str(most + 1))
    assert f"argument {option}: must be at most {most}, got {most + 1}" in message


@pytest.mark.parametrize(
    ("option", "most"), [("--processes", 256), ("--concurrency", 1024), ("--batch", 100_000)]
)
def test_alk_worker_accepts_a_count_at_its_bound(option, most):
    assert parsed("alk_worker", option, str(most))[option[2:]] == most


@pytest.mark.parametrize("option", ["--processes", "--concurrency", "--batch"])
def test_alk_worker_refuses_a_count_of_thousands_of_digits_as_above_its_bound(option):
    message = refused_by_the_parser("alk_worker", option, "9" * 5000)
    assert f"argument {option}: must be at most " in message and "5000 digits" in message
    assert len(message) < 200


def test_from_the_command_line_a_hundred_thousand_processes_exit_2_with_one_line_at_once():
    result = run_manage("alk_worker", "--processes", "100000", timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines()[-1].endswith(
        "error: argument --processes: must be at most 256, got 100000"
    )
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("value", ["-1", "0", "inf", "nan", "often"])
def test_alk_status_refuses_a_watch_interval_that_is_not_a_positive_finite_duration(value):
    assert "argument --watch: " in refused("alk_status", "--watch", value)


def test_the_messages_say_what_is_expected():
    assert "must be at most 36500 days, got inf" in refused("alk_worker", "--poll-interval", "inf")
    assert "not NaN" in refused("alk_worker", "--shutdown-timeout", "nan")
    assert "must be positive, got -1.0" in refused("alk_status", "--watch", "-1")
    assert "'many' is not a whole number" in refused("alk_worker", "--concurrency", "many")


@pytest.mark.parametrize("command", ["alk_worker", "alk_status", "alk_periodic"])
def test_a_database_alias_not_in_settings_is_refused_naming_the_ones_there(command):
    message = refused(command, "--database", "nope")
    assert "argument --database: 'nope' is not a database alias; " in message
    assert "settings.DATABASES has default" in message


@pytest.mark.parametrize(
    "args",
    [("alk_worker", "--poll-interval", "inf"), ("alk_worker", "--shutdown-timeout", "inf"),
     ("alk_status", "--watch", "-1"), ("alk_status", "--database", "nope"),
     ("alk_worker", "--database", "nope")],
)  # fmt: skip
def test_from_the_command_line_a_bad_value_exits_2_with_a_message_and_no_traceback(args):
    result = run_manage(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"error: argument {args[1]}: " in result.stderr
    assert "Traceback" not in result.stderr


def test_alk_worker_refuses_an_invalid_queue_name_saying_it_is_invalid():
    assert "argument --queue: invalid queue name 'bad name'" in refused(
        "alk_worker", "--queue", "bad name"
    )
