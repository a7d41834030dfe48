"Redaction on a corpus of planted secrets of every kind: every one is gone from everything written, no false positives."
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from knowlyr_lab.recorder import cli
from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.redact import default_redactor
from knowlyr_lab.recorder.secret_rules import SAMPLE_SECRETS, secret_value

# planted secrets: {text as it appears in a log: the value that must disappear}
CORPUS = {**{s: secret_value(k) for k, s in SAMPLE_SECRETS.items()},
    'PAYMENTS_API_KEY=9f86d081884c7d659a2feaa0c55ad015': '9f86d081884c7d659a2feaa0c55ad015',
    'export STRIPE_SECRET_KEY="sk_test_51Hx9Lq2Zr8Vb"': 'sk_test_51Hx9Lq2Zr8Vb',
    'API_KEY=abcdefghijklmnopqrstuvwx': 'abcdefghijklmnopqrstuvwx',
    'aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY': 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
    'payment with sk_live_51HxAbCdEfGhIjKlMnOpQrSt': 'sk_live_51HxAbCdEfGhIjKlMnOpQrSt',
    'refresh_token: 1//0gXyZ-abcdefGhIjKlMnOp': '1//0gXyZ-abcdefGhIjKlMnOp',
    '{"refresh_token": "ya29.A0ARrdaM-Qx7"}': 'ya29.A0ARrdaM-Qx7',
    'mysql -h db -u app -pHunter2pw app_db': 'Hunter2pw',
    'mysqldump -uroot -ptopsecret42 shop': 'topsecret42',
    'DB_PASSWORD=\'c0rrect-h0rse\'': 'c0rrect-h0rse',
    'client_secret = "GOCSPX-Ab12Cd34Ef56"': 'GOCSPX-Ab12Cd34Ef56',
    'curl -H "Authorization: Bearer ya29.a0AfH6SMBx3Gk"': 'ya29.a0AfH6SMBx3Gk',
    'AccountKey=' + 'A1b2' * 22: 'A1b2' * 22,
    'discord MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs': 'MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs',
    'telegram 110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1': 'AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1',
    'twilio AC' + '0a1b2c3d' * 4: 'AC' + '0a1b2c3d' * 4,
    'mailchimp ' + 'f' * 8 + '0123456789abcdef0123456789ab' + '-us12': '0123456789abcdef0123456789ab-us12',
    'square sq0csp-' + 'Ab1_' * 10 + 'xyz': 'sq0csp-' + 'Ab1_' * 10 + 'xyz',
    'pypi-AgEIcHlwaS5vcmc' + 'Q' * 70: 'pypi-AgEIcHlwaS5vcmc' + 'Q' * 70,
    '//registry.npmjs.org/:_authToken=npm_' + 'a1B2' * 9: 'npm_' + 'a1B2' * 9,
    'git clone https://x-access-token:ghs_' + 'Zz9' * 12 + '@github.com/o/r': 'ghs_' + 'Zz9' * 12,
    # issue 24: kinds that leaked, and quoted forms of the command-line ones (quotes arrive escaped inside JSON tool calls)
    'aws configure set aws_secret_access_key "wJalrXUtnFEMI/K7MDENG/bPxRfiCYQUOTEDKEY"': 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYQUOTEDKEY',
    "aws configure set default.aws_session_token 'FwoGZXIvYXdzEJr7Sess10nT0k'": 'FwoGZXIvYXdzEJr7Sess10nT0k',
    "mysql -h db -u app -p'Qu0tedPw77' app_db": 'Qu0tedPw77',
    'mariadb -uroot -p"DqPw5512x" -e "show tables"': 'DqPw5512x',
    'docker login -u ci -p "Dl0ginPw55" ghcr.io': 'Dl0ginPw55',
    'echo x | docker login registry.example.com --username ci -p Zk8mWq2Lp': 'Zk8mWq2Lp',
    'curl --user "deploy:Cu7lQuoted9" https://ci.example.com': 'Cu7lQuoted9',
    'curl -s -u admin:Adm1nPw55 -X POST https://x/api': 'Adm1nPw55',
    'REDIS_URL=redis://:R3disPw77x@redis:6379/0': 'R3disPw77x',
    'rediss://:S3cureR3dis@cache.example.com:6380': 'S3cureR3dis',
    'curl "https://acct.blob.core.windows.net/c?sv=2021-08-06&se=2026-01-01&sr=c&sp=rl&sig=AbCdEf0123456789%2BgHiJkLmNoPqRsTuV%3D"': 'AbCdEf0123456789%2BgHiJkLmNoPqRsTuV%3D',
    'headers = {"Authorization": "Basic YWRtaW46c3VwZXJzZWNyZXQ="}': 'YWRtaW46c3VwZXJzZWNyZXQ=',
    'TWINE_PASSWORD=pypi-AgENdGVzdC5weXBpLm9yZwIkZmFrZQ0123456789': 'pypi-AgENdGVzdC5weXBpLm9yZwIkZmFrZQ0123456789',
    'npm config set //registry.npmjs.org/:_authToken npm_' + 'Q9w8E7r6T5' * 3 + 'y4U3i2': 'npm_' + 'Q9w8E7r6T5' * 3 + 'y4U3i2',
    'doctl auth init -t dop_v1_' + 'fedcba9876543210' * 4: 'dop_v1_' + 'fedcba9876543210' * 4,
    'git push https://github.com/o/r using github_pat_11BBBBBBB0' + 'Zz9Yy8Xx7W' * 2 + '_' + 'Vv6Uu5Tt4S' * 6: 'github_pat_11BBBBBBB0' + 'Zz9Yy8Xx7W' * 2 + '_' + 'Vv6Uu5Tt4S' * 6,
    'twine upload -p pypi-' + 'Wq3Er5Ty7U' * 5 + ' dist/*': 'pypi-' + 'Wq3Er5Ty7U' * 5,
    'GH_TOKEN=github_pat_11AAAAAAA0' + 'Bb1Cc2Dd3E' * 2 + '_' + 'Ff4Gg5Hh6I' * 6: 'github_pat_11AAAAAAA0' + 'Bb1Cc2Dd3E' * 2 + '_' + 'Ff4Gg5Hh6I' * 6,
}
KEEP = ["commit 9f1c2ab3d4e5f60718293a4b5c6d7e8f90a1b2c3", "id 123e4567-e89b-12d3-a456-426614174000", "    password: SecretStr",
        "api_key: Optional[SecretStr] = None", "def get_password_hash(password: str) -> str:", '"max_tokens": 4096, "prompt_tokens": 1200',
        "tokenizer: gpt2-tokenizer-fast", "AbstractSingletonProxyFactoryBeanConfigurationResolver", "toolu_01YGzqpRE16Vricda3Aqcejo",
        "msg_01WvueFjZVbHcj4H4zUzeGv2", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "password = os.environ['DB_PASSWORD']", "api_key=self.config.api_key", "OPENAI_API_KEY=$OPENAI_API_KEY", "token_type: bearer",
        "secret_key_base = ENV.fetch('SECRET_KEY_BASE')", "client = LLMConfig(base_url=BASE_URL, api_key=API_KEY)", "chatcmpl-BSXk0dWkG4hfPt0lph4oFO35iT73I",
        # ordinary code stays as it is (issue 24)
        "user.password = hash_password(form.password)", "    token = create_access_token(data={'sub': user.email})",
        "if not verify_password(password, user.hashed_password):", "secret = generate_secret(length=32)", "api_key = get_api_key(request)",
        "    new_password = request.form['new_password']", "curl -u $CI_USER:$CI_TOKEN https://x", "mysql -u root -p mydb",
        "docker login ghcr.io", "redis://localhost:6379/0", "https://example.com/search?q=sig&page=2", "Authorization: Basic <base64>"]

@pytest.mark.parametrize('text', list(CORPUS), ids=lambda s: s[:40])
def test_planted_secret_is_redacted(text):
    out, counts = default_redactor().redact_text(f'log: {text} (end)')
    assert CORPUS[text] not in out and counts and '[REDACTED:' in out

@pytest.mark.parametrize('text', KEEP)
def test_no_false_positive(text):
    assert default_redactor().redact_text(text) == (text, {})

def test_rules_come_from_detect_secrets():
    srcs = {p.source for p in default_redactor().patterns}
    assert sum(s.startswith('detect-secrets') for s in srcs) >= 15       # the maintained plugins, loaded from the package
    assert len([p for p in default_redactor().patterns if p.source == 'knowlyr-lab']) <= 22     # each addition documented on the page

def test_corpus_never_written_anywhere(tmp_path):
    "Every planted secret, in every place a log can hold it, is absent from the output, the quarantine and the side file"
    blob = ' ;; '.join(CORPUS)
    logs = tmp_path / 'logs'; logs.mkdir()
    (logs / 'chat.jsonl').write_text(json.dumps({'messages': [
        {'role': 'system', 'content': blob}, {'role': 'user', 'content': blob},
        {'role': 'assistant', 'content': blob, 'tool_calls': [{'id': 'c1', 'function': {'name': 'shell', 'arguments': json.dumps({'cmd': blob, 'api_key': 'a8f3Kx92LmQ0zR7tW5'})}}]},
        {'role': 'tool', 'tool_call_id': 'c1', 'content': blob}, {'role': 'narrator', 'content': blob}]}) + '\n'
        + '{"messages": [{"role": "user", "content": ' + json.dumps(blob)[:-40] + '\n')            # malformed: quarantined
    (logs / 'run.txt').write_text(f'Question: {blob}\nThought: go\nAction: search[{blob}]\nObservation: {blob}\nFinal Answer: done\n')
    (logs / 'arr.json').write_text(json.dumps([{'id': 'a', 'messages': [{'role': 'user', 'content': blob}]}]))
    out, q, side = tmp_path / 'out.jsonl', tmp_path / 'q.jsonl', tmp_path / 'side.jsonl'
    cli.main(['convert', str(logs), '-o', str(out), '--quarantine', str(q), '--unmapped', str(side), '--no-progress'], Console(file=io.StringIO()))
    written = out.read_text() + q.read_text() + (side.read_text() if side.exists() else '')
    assert q.read_text().strip() and 'narrator' in written
    for text, value in list(CORPUS.items()) + [('api_key', 'a8f3Kx92LmQ0zR7tW5')]:
        core = max(value.split('\n'), key=len)
        assert core not in written, text

def test_real_logs_lose_only_their_one_real_credential():
    """Across all the real logs, the only thing redacted is the password an OpenAgentSafety task states in plain text -- in the
    instruction, and (since a value redacted once is redacted everywhere) in the `curl -u user:password` the agent then runs"""
    from knowlyr_lab.recorder.report import ConversionReport
    r = ConversionReport()
    trajs = list(convert(Path(__file__).parent / 'fixtures' / 'agent_logs', report=r))
    assert set(r.redactions) == {'secret_assignment', 'curl_user_password'}, r.redactions
    hit = [t for t in trajs if t.metadata.get('redactions')]
    assert [t.source.path.rsplit('/', 1)[-1] for t in hit] == ['openagentsafety_gpt-4o__output.jsonl'] * 2
    assert all('Password: [REDACTED:secret_assignment]' in t.task.instruction for t in hit)
    assert not any('theagentcompany' in t.model_dump_json() for t in hit)          # the password (also the user name) is gone everywhere
    assert any('curl -u [REDACTED:' in json.dumps(s.action.params) for t in hit for s in t.steps if s.action)

def test_error_reasons_are_redacted(tmp_path):
    "An error message that quotes a record (here a bad exit code holding a key) is redacted before it is kept or written"
    from knowlyr_lab.recorder.report import ConversionReport
    key = SAMPLE_SECRETS['github_token']
    q = tmp_path / 'q.jsonl'
    r = ConversionReport(quarantine=q)
    r.scrub = default_redactor()
    r.bad_record('x.jsonl', 3, f"messages[2].exit_code: invalid literal for int(): '{key}'", None)
    r.close()
    assert key not in r.errors[0] and key not in q.read_text() and r.errors[0].endswith("int(): '[REDACTED:github_token]'")
    assert r.redactions == {'github_token': 1}


def test_value_redacted_once_is_redacted_everywhere(tmp_path):
    "A password the task states (caught by a rule) is also gone from the command that types it and the output that echoes it"
    pw = 'Hq3vL9zXw2'
    log = tmp_path / 'chat.jsonl'
    log.write_text(json.dumps({'messages': [
        {'role': 'system', 'content': f'You may use the sudo password when needed ({pw}).'},
        {'role': 'user', 'content': f'Install htop. The sudo Password: {pw}'},
        {'role': 'assistant', 'content': f'I will use {pw} with sudo.', 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {
            'name': 'shell', 'arguments': json.dumps({'cmd': f'echo {pw} | sudo -S apt-get install -y htop'})}}]},
        {'role': 'tool', 'tool_call_id': 'c1', 'content': f'[sudo] password accepted: {pw}'},
        {'role': 'assistant', 'content': 'Installed.'}]}) + '\n')
    (t,) = list(convert(log))
    dumped = t.model_dump_json()
    assert pw not in dumped, dumped
    assert t.steps[0].action.params['cmd'] == 'echo [REDACTED:secret_assignment] | sudo -S apt-get install -y htop'
    assert t.metadata['redactions']['secret_assignment'] >= 4
    assert t.id == t.content_hash()                                  # the id is the hash of the redacted content

def test_ordinary_code_in_a_log_is_written_unchanged(tmp_path):
    "Source code that names passwords and tokens (as every web app does) converts byte for byte"
    code = '\n'.join(KEEP[-12:-4])
    log = tmp_path / 'chat.jsonl'
    log.write_text(json.dumps({'messages': [{'role': 'user', 'content': 'Review auth.py'},
        {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'read', 'arguments': json.dumps({'path': 'auth.py'})}}]},
        {'role': 'tool', 'tool_call_id': 'c1', 'content': code}, {'role': 'assistant', 'content': 'Looks fine.'}]}) + '\n')
    (t,) = list(convert(log))
    assert t.steps[0].observation.content == code and not t.metadata.get('redactions')
