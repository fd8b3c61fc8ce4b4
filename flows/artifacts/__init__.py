"""What runs show in the Prefect UI: evidence a researcher reads in the artifact pane, failures in
words, generations and diffs for operators. Pure renderers plus one publishing call each."""
