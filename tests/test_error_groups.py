"""The error fingerprint (error_groups.py): pure functions, no database."""

from __future__ import annotations

from django_alkqueue.error_groups import (
    FINGERPRINT_LENGTH,
    app_frame,
    fingerprint,
    is_library_path,
    normalise,
    signature,
)


def error_text(headline: str, *frames: str) -> str:
    lines = [f'  File "{path}", line 12, in {function}\n    code()' for path, function in
             (frame.split(":") for frame in frames)]  # fmt: skip
    traceback = "Traceback (most recent call last):\n" + "\n".join(lines)
    return f"{headline}\n\n{traceback}\n{headline}"


def test_numbers_become_a_placeholder():
    assert normalise("smtp down for order 151") == "smtp down for order <num>"


def test_signed_decimal_and_dotted_numbers_become_one_placeholder():
    assert normalise("got -3.5 from 10.0.0.1") == "got <num> from <num>"


def test_identifiers_mixing_letters_and_digits_become_a_placeholder():
    text = "consumer c1 of user_17b timed out after 30s in utf8"
    assert normalise(text) == "consumer <id> of <id> timed out after <id> in <id>"


def test_a_word_without_digits_stays_and_a_number_with_underscores_is_an_id():
    assert normalise("retry user_x after 17_000 ms") == "retry user_x after <id> ms"


def test_short_hex_ids_become_a_placeholder():
    text = "commit a3f5c9e raised, commit 0fe4 too"
    assert normalise(text) == "commit <id> raised, commit <id> too"


def test_errors_naming_different_consumers_or_users_share_a_fingerprint():
    first = error_text("KeyError: consumer c1 has no user_17b", "/srv/app/shop/emails.py:send")
    second = error_text("KeyError: consumer c4 has no user_3a", "/srv/app/shop/emails.py:send")
    assert fingerprint(first) == fingerprint(second)


def test_errors_naming_different_hex_ids_share_a_fingerprint():
    first = error_text("LookupError: no blob 9f86d081884c7d65 at 0x7f3a2b10", "/srv/a/b.py:get")
    second = error_text("LookupError: no blob 2c26b46b68ffc68f at 0x55d1", "/srv/a/b.py:get")
    assert fingerprint(first) == fingerprint(second)


def test_uuids_become_a_placeholder():
    text = "job 3fa85f64-5717-4562-b3fc-2c963f66afa6 missing"
    assert normalise(text) == "job <uuid> missing"


def test_hex_ids_become_a_placeholder():
    assert normalise("object at 0x7f3a2b10 digest a3f5c9e2b17d") == "object at <hex> digest <hex>"


def test_a_word_of_hex_letters_without_digits_stays():
    assert normalise("deadbeefcafe is a word") == "deadbeefcafe is a word"


def test_single_and_double_quoted_strings_become_a_placeholder():
    assert normalise("""KeyError 'user_42' and "other" """) == "KeyError <str> and <str> "


def test_an_apostrophe_opens_no_quoted_string():
    assert normalise("can't reach 'db'") == "can't reach <str>"


def test_email_addresses_become_a_placeholder():
    assert normalise("bounced for bob.smith+shop@mail.example.com") == "bounced for <email>"


def test_the_signature_splits_the_headline_into_class_and_normalised_message():
    found = signature("RuntimeError: smtp down for order 151")
    assert (found.exception, found.message) == ("RuntimeError", "smtp down for order <num>")
    assert found.title == "RuntimeError: smtp down for order <num>"


def test_a_reason_alone_is_a_message_without_class():
    assert signature("expired").exception == ""
    assert signature("max attempts exceeded").title == "max attempts exceeded"


def test_a_bare_exception_class_is_the_class():
    assert signature("KeyError").exception == "KeyError"


def test_the_innermost_application_frame_skips_the_standard_library_and_site_packages():
    text = error_text(
        "RuntimeError: smtp down",
        "/srv/app/shop/views.py:checkout",
        "/srv/app/shop/emails.py:send_receipt",
        "/venv/lib/python3.12/site-packages/django/core/mail.py:send",
        "/usr/lib/python3.12/smtplib.py:connect",
    )
    assert app_frame(text) == "shop/emails.py in send_receipt"


def test_the_frame_is_read_from_the_last_traceback_of_a_chain():
    cause = error_text("KeyError: 'x'", "/srv/app/shop/a.py:first")
    final = error_text("RuntimeError: boom", "/srv/app/shop/b.py:second")
    text = final.split("\n", 1)[0] + "\n\n" + cause + "\n\nThe above exception ...\n\n" + final
    assert app_frame(text) == "shop/b.py in second"


def test_no_traceback_means_no_frame():
    assert app_frame("expired") == ""


def test_frozen_and_library_paths_are_library_code():
    assert is_library_path("<frozen importlib._bootstrap>")
    assert is_library_path("/opt/venv/lib/python3.12/site-packages/x.py")
    assert is_library_path("/usr/lib/python3/dist-packages/x.py")
    assert is_library_path("/usr/local/lib/python3.13/json/decoder.py")
    assert not is_library_path("/srv/app/shop/emails.py")


def test_errors_differing_only_in_their_variable_parts_share_a_fingerprint():
    first = error_text("RuntimeError: smtp down for order 151", "/srv/a/shop/emails.py:send")
    second = error_text("RuntimeError: smtp down for order 137", "/srv/b/shop/emails.py:send")
    assert fingerprint(first) == fingerprint(second)
    assert len(fingerprint(first)) == FINGERPRINT_LENGTH


def test_the_same_message_raised_from_another_function_is_another_group():
    first = error_text("RuntimeError: smtp down", "/srv/app/shop/emails.py:send")
    second = error_text("RuntimeError: smtp down", "/srv/app/shop/emails.py:resend")
    assert fingerprint(first) != fingerprint(second)


def test_another_exception_class_is_another_group():
    assert fingerprint("RuntimeError: down") != fingerprint("ConnectionError: down")
