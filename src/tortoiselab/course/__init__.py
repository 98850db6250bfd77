"""Course labs (labs/*.md): their front matter and the grader."""
