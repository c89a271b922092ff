"""What voicelat reads from and writes to disk: pipeline, budget, matrix and fixture files
(errors name the file and the line), and a run's results (turns.jsonl, summary.json)."""
