"""`ember eval`: both memory pipelines on a public long-conversation benchmark (docs/eval.md).

`formats` reads LoCoMo and LongMemEval files into conversations and questions and writes each
conversation as an Ember import file; `run` imports, lets the worker digest, searches both
memories and asks the answer and judge models; `report` and `html` show what SQL computed.
"""
