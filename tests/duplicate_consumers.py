"""Two consumers for one queue: imported only by the tests of the duplicate check."""

from django_alkqueue import consumer


@consumer("duplicated")
def first_handler(payload, job):
    return None


@consumer("duplicated")
def second_handler(payload, job):
    return None
