"""The browser tiers of front-end tasks (`TaskInstance.checks`): static (the files, read), runtime
(the page rendered in Chromium inside the grading sandbox) and visual (its screenshots measured)."""
