"""The four seed studies: their claims, how each is measured from runs, verdicts and REPRODUCTION.md."""
