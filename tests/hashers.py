"""A password hasher for the suite: PBKDF2 with one iteration.

Django's PBKDF2 costs about 0.3 s of CPU a hash, by design; the suite
creates a user, or logs one in, in hundreds of tests. The hash keeps
PBKDF2's algorithm name and records its iteration count, so a real server
started by a test (browser logins) verifies it with the stock hasher.
"""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1
