"""The course's grader: what runs a submission's code and its tests (see runner.py).

``runner`` runs in the sandbox, once per submission; ``kit`` holds the helpers hidden tests
import (never a student's). ``scripts/assignments.py grade`` drives them.
"""
