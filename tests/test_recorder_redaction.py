"Redaction on a corpus of planted secrets of every kind: every one is gone from everything written, no false positives."
import base64
import io
import json
import random
import re
import string
from pathlib import Path

import pytest
from rich.console import Console

from knowlyr_lab.cli import recorder as cli
from knowlyr_lab.recorder.convert import convert
from knowlyr_lab.recorder.redact import default_redactor, redact_values
from knowlyr_lab.recorder.secret_rules import SAMPLE_SECRETS, TOKEN_SHAPES, secret_value

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
    # a quoted value runs to its closing quote, delimiters inside it included (detect-secrets' KeywordDetector flags these)
    'DB_PASSWORD="K7#q;Lm2(pZ"': 'K7#q;Lm2(pZ',
    "DB_PASSWORD='p@ss;w0rd!2024'": 'p@ss;w0rd!2024',
    'password: "Tr0ub&4dor3xyz"': 'Tr0ub&4dor3xyz',
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
    assert len([p for p in default_redactor().patterns if p.source == 'knowlyr-lab']) <= 26     # each addition documented on the page
    assert len([p for p in default_redactor().patterns if p.source == 'knowlyr-lab vendor shapes']) == len(TOKEN_SHAPES)   # one per row

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


# ---------------------------------------------------------------- issue 39 item 7: an attacker's further kinds

ALNUM, HEX, URLSAFE = string.ascii_letters + string.digits, '0123456789abcdef', string.ascii_letters + string.digits + '_-'

def tok(prefix:str, alphabet:str, n:int)->str:
    "A made-up token: `prefix` and `n` characters of `alphabet` (with a capital, a small letter and a digit when the alphabet has them)"
    r = random.Random(prefix + str(n))
    body = ''.join(r.choice(alphabet) for _ in range(n))
    return prefix + ('A' + body[1:-2] + 'z7' if alphabet in (ALNUM, URLSAFE) else body)

def b64(s:str)->str: return base64.b64encode(s.encode()).decode()

FURTHER = {   # {text as a log holds it: the value that must disappear}; each leaked on the previous main
    'the webhook signing secret is ' + (v := tok('whsec_', ALNUM, 32)): v,
    'oauth client secret ' + (v := tok('GOCSPX-', URLSAFE, 28)): v,
    'got access token ' + (v := tok('ya29.', URLSAFE, 120)): v,
    'refresh with ' + (v := tok('1//0g', URLSAFE, 98)): v,
    'vault token ' + (v := tok('hvs.', URLSAFE, 95)): v,
    'vault login ' + (v := tok('s.', ALNUM, 24)): v,
    'batch token ' + (v := tok('hvb.', URLSAFE, 140)): v,
    'machine api.example.com login alice password ' + (v := 'Zq8vNetrc3x'): v,
    'machine db.internal\n  login deploy\n  password ' + (v := 'Nm4kTrc9Lp'): v,
    'echo ' + (v := b64('sk-proj-' + tok('', ALNUM, 48))) + ' | base64 -d': v,
    'AUTH_BLOB=' + (v := b64('ghp_' + tok('', ALNUM, 36))): v,
    'client-key-data: ' + (v := b64('-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA' + tok('', ALNUM, 40) + '\n-----END RSA PRIVATE KEY-----\n')): v,
    'passphrase: ' + (v := 'Gx7-correct-Pass'): v,
    'gpg --batch --passphrase ' + (v := 'Hk2vPhrase9x') + ' -d secrets.gpg': v,
    'slack app token ' + (v := 'xapp-1-A0123456789-1234567890123-' + tok('', HEX, 64)): v,
    'github ' + (v := tok('ghp_', ALNUM, 40)): v,
    'discord https://discord.com/api/webhooks/112233445566778899/' + (v := tok('', URLSAFE, 68)): v,
    'azure client secret ' + (v := 'Ab1' + '8Q~' + tok('', ALNUM, 34)): v,
    'shopify ' + (v := tok('shpat_', HEX, 32)): v,
    'jira token ' + (v := tok('ATATT3xFfGF0', URLSAFE, 180) + '=' + tok('', 'ABCDEF0123456789', 8)): v,
    'linear ' + (v := tok('lin_api_', ALNUM, 40)): v,
    'notion ' + (v := 'ntn_' + '12345678901' + tok('', ALNUM, 35)): v,
    'doppler ' + (v := tok('dp.pt.', ALNUM, 43)): v,
    'postman ' + (v := 'PMAK-' + tok('', HEX, 24) + '-' + tok('', HEX, 34)): v,
    'grafana ' + (v := tok('glsa_', ALNUM, 32) + '_' + tok('', HEX, 8)): v,
    'grafana cloud ' + (v := tok('glc_', ALNUM, 40)): v,
    'newrelic ' + (v := tok('NRAK-', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789', 27)): v,
    'sentry ' + (v := tok('sntryu_', HEX, 64)): v,
    'databricks ' + (v := tok('dapi', HEX, 32)): v,
    'age ' + (v := tok('AGE-SECRET-KEY-1', 'QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L', 58)): v,
    'docker hub ' + (v := tok('dckr_pat_', URLSAFE, 27)): v,
    'terraform ' + (v := tok('', ALNUM, 14) + '.atlasv1.' + tok('', URLSAFE, 67)): v,
    'supabase ' + (v := tok('sbp_', HEX, 40)): v,
    'groq ' + (v := tok('gsk_', ALNUM, 52)): v,
    'xai ' + (v := tok('xai-', ALNUM, 80)): v,
    'replicate ' + (v := tok('r8_', ALNUM, 37)): v,
    'perplexity ' + (v := tok('pplx-', ALNUM, 48)): v,
    'langsmith ' + (v := tok('lsv2_pt_', HEX, 32) + '_' + tok('', HEX, 10)): v,
    'pinecone ' + (v := tok('pcsk_', ALNUM, 6) + '_' + tok('', ALNUM, 63)): v,
    'tavily ' + (v := tok('tvly-dev-', ALNUM, 32)): v,
    'fcm ' + (v := tok('AAAA', URLSAFE, 7) + ':APA91b' + tok('', URLSAFE, 134)): v,
    'braintree ' + (v := 'access_token$production$' + tok('', 'abcdefghijklmnopqrstuvwxyz0123456789', 16) + '$' + tok('', HEX, 32)): v,
    'planetscale ' + (v := tok('pscale_tkn_', ALNUM, 43)): v,
    'pulumi ' + (v := tok('pul-', HEX, 40)): v,
    'prefect ' + (v := tok('pnu_', ALNUM, 36)): v,
    'rubygems ' + (v := tok('rubygems_', HEX, 48)): v,
    'heroku ' + (v := tok('HRKU-AA', URLSAFE, 58)): v,
    'flyio ' + (v := tok('fo1_', URLSAFE, 43)): v,
    'dynatrace ' + (v := 'dt0c01.' + tok('', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789', 24) + '.' + tok('', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789', 64)): v,
    'brevo ' + (v := tok('xkeysib-', HEX, 64) + '-' + tok('', ALNUM, 16)): v,
    'openshift ' + (v := tok('sha256~', URLSAFE, 43)): v,
    'stripe test ' + (v := tok('sk_test_', ALNUM, 99)): v,
    'stripe restricted ' + (v := tok('rk_live_', ALNUM, 99)): v,
    'square ' + (v := tok('EAAA', URLSAFE, 60)): v,
    'x-api-key: ' + (v := tok('', ALNUM, 32)): v,
    'Authorization: Token ' + (v := tok('', HEX, 40)): v,
    'ENCRYPTION_KEY=' + (v := tok('', ALNUM, 32)): v,
    'APP_KEY=base64:' + (v := b64(tok('', ALNUM, 32))): v,
    '{"auths": {"ghcr.io": {"auth": "' + (v := b64('bot:' + tok('', ALNUM, 20))) + '"}}}': v,
    '//registry.npmjs.org/:_auth=' + (v := b64('ci:' + tok('', ALNUM, 16))): v,
    'localhost:5432:app:app:' + (v := 'Pg9passFile7'): v,
    'PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nPrivate-Lines: 1\n' + (v := tok('AAAAgQ', ALNUM + '+/', 60)) + '\nPrivate-MAC: ' + tok('', HEX, 40): v,
    'sshpass -p ' + (v := 'Ss7hPassX') + ' ssh deploy@web': v,
    'redis-cli -h cache -a ' + (v := 'R3disCliPw') + ' ping': v,
    'openssl pkcs12 -export -passout pass:' + (v := 'P12exportPw9') + ' -out cert.p12': v,
    'htpasswd -b -c .htpasswd admin ' + (v := 'Htp4sswdX'): v,
    'ldapsearch -x -D cn=admin -w ' + (v := 'Ld4pBindPw') + ' -b dc=x': v,
    'keytool -importcert -keystore ks.jks -storepass ' + (v := 'K3ystorePw'): v,
    'wget --http-password ' + (v := 'Wg3tHttpPw') + ' https://x/file': v,
    'smbclient //fs/share -U alice%' + (v := 'Smb4lic3Pw'): v,
    'az login --service-principal -u app -p ' + (v := 'Az9SpSecretX') + ' --tenant t': v,
    'sqlcmd -S db -U sa -P ' + (v := 'Sq1cmdPwX') + ' -Q "select 1"': v,
}

def _chat_log(tmp_path, thought, cmd, output, name='chat.jsonl'):
    "An OpenAI-chat JSON log: `thought` (assistant text), `cmd` (a tool call's argument, JSON inside JSON), `output` (the tool's result)"
    p = tmp_path / name
    p.write_text(json.dumps({'messages': [{'role': 'user', 'content': 'Do the task.'},
        {'role': 'assistant', 'content': thought, 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'shell', 'arguments': json.dumps({'cmd': cmd})}}]},
        {'role': 'tool', 'tool_call_id': 'c1', 'content': output}, {'role': 'assistant', 'content': 'Done.'}]}) + '\n')
    (t,) = list(convert(p))
    return t

def _left(value:str, got:str, given:str)->list:
    "Pieces of `value` still in `got` (redacted from `given`): any 6 characters of it or its last 4, where the rest of `given` has none"
    rest, context = re.sub(r'\[REDACTED:[a-z0-9_]+\]', ' ', got), given.replace(value, ' ')
    return [p for p in {value[i:i + 6] for i in range(0, len(value) - 5, 3)} | {value[-4:]} if p in rest and p not in context]

@pytest.mark.parametrize('text', list(FURTHER), ids=lambda s: s[:30])
def test_further_kind_redacted_in_thought_param_and_observation(tmp_path, text):
    "Each further kind is gone from a thought, a tool parameter and an observation, converted through the recorder"
    given = {'thought': f'I see {text} here', 'param': f'echo {text}', 'observation': f'out: {text}\nend'}
    t = _chat_log(tmp_path, *given.values())
    s, v = t.steps[0], FURTHER[text]
    for where, got in (('thought', s.thought), ('param', s.action.params['cmd']), ('observation', s.observation.content)):
        assert not _left(v, got, given[where]) and '[REDACTED:' in got, (where, got)
    assert v not in t.model_dump_json() and json.dumps(v)[1:-1] not in t.model_dump_json()

AFTER_NEWLINE = {'mysql -u root -pN3wlinePw1 app': 'N3wlinePw1', 'docker login -u ci -p D0ckNewline9 ghcr.io': 'D0ckNewline9',
                 'aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYNEWLINEK': 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYNEWLINEK',
                 'curl -u admin:hunter2xyz http://x': 'hunter2xyz', 'sshpass -p Ss7hNewline ssh web': 'Ss7hNewline'}

@pytest.mark.parametrize('cmd', list(AFTER_NEWLINE), ids=lambda s: s.split()[0])
def test_command_after_a_newline_in_a_json_log(tmp_path, cmd):
    "A command-line secret that follows a newline -- escaped once in the JSON record, twice in a tool call's JSON arguments -- is redacted"
    t = _chat_log(tmp_path, f'Plan:\n{cmd}', f'ls\n{cmd}', f'$ ls\n{cmd}\nok')
    assert AFTER_NEWLINE[cmd] not in t.model_dump_json(), t.model_dump_json()
    assert t.steps[0].action.params['cmd'].startswith('ls\n') and '[REDACTED:' in t.steps[0].action.params['cmd']

def _two_steps(tmp_path, first:str, second:str):
    p = tmp_path / 'split.jsonl'
    p.write_text(json.dumps({'messages': [{'role': 'user', 'content': 'Print the deploy key.'},
        {'role': 'assistant', 'content': f'The key is {first}', 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'shell', 'arguments': '{"cmd": "ls"}'}}]},
        {'role': 'tool', 'tool_call_id': 'c1', 'content': 'deploy.key'}, {'role': 'assistant', 'content': f'{second} -- that is the whole key.'}]}) + '\n')
    (t,) = list(convert(p))
    return t

def test_key_split_across_two_steps_loses_its_rest(tmp_path):
    "The first part ends one step (recognised by its rule), the rest starts the next: the rest is gone too, final answer included"
    first, rest = 'sk-proj-' + 'Ab3xQ9Lm' * 3, 'Zz81Kq0LmN7pW2rT'
    t = _two_steps(tmp_path, first, rest)
    dumped = t.model_dump_json()
    assert first not in dumped and rest not in dumped, dumped
    assert t.steps[1].thought == '[REDACTED:openai_key] -- that is the whole key.'

def test_key_cut_before_its_rule_can_see_it_is_a_documented_limit(tmp_path):
    "Documented on the redaction page: a first part too short for any rule is not recognised, so neither part is redacted"
    t = _two_steps(tmp_path, 'sk-proj-Ab3x', 'Q9LmAb3xQ9LmZz81Kq0LmN7pW2rT')
    assert t.steps[0].thought == 'The key is sk-proj-Ab3x' and t.steps[1].thought.startswith('Q9LmAb3xQ9LmZz81Kq0LmN7pW2rT')

def test_placeholder_is_not_propagated(tmp_path):
    "`user:password@` in a connection string is a placeholder: the word `password` stays in the code of the same trajectory"
    code = 'def reset(user, new_password):\n    user.password = hash_password(new_password)'
    t = _chat_log(tmp_path, 'Connect with postgres://user:password@localhost:5432/app', 'cat app.py', code)
    assert t.steps[0].observation.content == code and 'user:password@localhost' in t.steps[0].thought
    for word in ('password', 'secret', 'changeme', 'xxxxxxxx', '<token>', 'example', 'Password1', 'sunshine'):   # found by some rule or not, never spread
        assert redact_values({'cmd': f'hash_{word}(x)'}, {word: 'secret_assignment'}) == {'cmd': f'hash_{word}(x)'}, word
    assert redact_values({'cmd': 'echo Hq3vL9zXw2'}, {'Hq3vL9zXw2': 'secret_assignment'}) == {'cmd': 'echo [REDACTED:secret_assignment]'}

ORDINARY = json.loads((Path(__file__).parent / 'fixtures' / 'redaction' / 'ordinary_snippets.json').read_text())
FP_BUDGET = 0     # ordinary snippets the default redactor may change (5 of 52 on the previous main)

def test_false_positives_on_ordinary_snippets(tmp_path):
    "Ordinary code, configs with placeholders, tool output and prose: at most FP_BUDGET snippets are touched, also through the converter"
    assert len(ORDINARY) >= 30
    touched = [s for s in ORDINARY if default_redactor().redact_text(s)[1]]
    assert len(touched) <= FP_BUDGET, touched
    log = tmp_path / 'ordinary.jsonl'
    log.write_text(json.dumps({'messages': [{'role': 'user', 'content': 'Look around.'}] + [m for i, s in enumerate(ORDINARY) for m in (
        {'role': 'assistant', 'content': None, 'tool_calls': [{'id': f'c{i}', 'type': 'function', 'function': {'name': 'shell', 'arguments': '{"cmd": "cat"}'}}]},
        {'role': 'tool', 'tool_call_id': f'c{i}', 'content': s})]}) + '\n')
    (t,) = list(convert(log))
    changed = [s for s, st in zip(ORDINARY, t.steps) if st.observation.content != s]
    assert len(changed) <= FP_BUDGET and not t.metadata.get('redactions'), changed


# a command with `\"` inside a JSON `arguments` string is escaped twice in its record: the params decoded from it are
# redacted too, in every adapter that decodes arguments, and the value then everywhere else in the trajectory
ESCAPED_CMD = ['bash', '-lc', 'curl -d "{\\"token\\": \\"Zq81LmWx0pTr9k\\"}" https://x']


def _codex_rollout(tmp_path, args):
    p = tmp_path / 'rollout-2025-01-01T00-00-00-x.jsonl'
    recs = [{'timestamp': '2025-01-01T00:00:00Z', 'type': 'session_meta', 'payload': {'id': 's1', 'cwd': '/x'}},
            {'timestamp': '2025-01-01T00:00:01Z', 'type': 'response_item',
             'payload': {'type': 'message', 'role': 'user', 'content': [{'type': 'input_text', 'text': 'post it'}]}},
            {'timestamp': '2025-01-01T00:00:02Z', 'type': 'response_item',
             'payload': {'type': 'function_call', 'name': 'shell', 'arguments': args, 'call_id': 'c1'}},
            {'timestamp': '2025-01-01T00:00:03Z', 'type': 'response_item',
             'payload': {'type': 'function_call_output', 'call_id': 'c1', 'output': 'sent Zq81LmWx0pTr9k'}}]
    p.write_text(''.join(json.dumps(r) + '\n' for r in recs))
    return p


def _chat_tool_call(tmp_path, args):
    p = tmp_path / 'chat.jsonl'
    call = {'id': 'c1', 'type': 'function', 'function': {'name': 'shell', 'arguments': args}}
    p.write_text(json.dumps({'messages': [{'role': 'user', 'content': 'post it'},
                                          {'role': 'assistant', 'content': None, 'tool_calls': [call]},
                                          {'role': 'tool', 'tool_call_id': 'c1', 'content': 'sent Zq81LmWx0pTr9k'}]})
                 + '\n')
    return p


@pytest.mark.parametrize('make', [_codex_rollout, _chat_tool_call], ids=['codex-cli', 'openai-chat'])
def test_secret_in_escaped_tool_call_arguments_is_redacted(tmp_path, make):
    (t,) = convert(make(tmp_path, json.dumps({'command': ESCAPED_CMD})))
    assert 'Zq81LmWx0pTr9k' not in t.model_dump_json()
    call = next(s.action for s in t.steps if s.action is not None)
    assert call.params['command'][2] == 'curl -d "{\\"token\\": \\"[REDACTED:secret_assignment]\\"}" https://x'
    # once in the params, once in the output the value is propagated to
    assert t.metadata['redactions'] == {'secret_assignment': 2}


# a JSON writer may escape any character as \uXXXX (System.Text.Json writes '+' as \u002B): the prefilter reads the
# escapes as the characters they stand for, so the rules still run on the decoded strings
@pytest.mark.parametrize('text, value', [
    ('curl -H "Authorization: Bearer abc+def+ghi+jkl+mno1234567" https://api.x', 'abc+def+ghi+jkl+mno1234567'),
    ('export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE', 'AKIAIOSFODNN7EXAMPLE')], ids=['bearer', 'aws'])
def test_secret_behind_unicode_escapes_is_redacted(tmp_path, text, value):
    line = json.dumps({'messages': [{'role': 'user', 'content': text}, {'role': 'assistant', 'content': 'ok'}]})
    escaped = line.replace('+', '\\u002B').replace('AKIAI', 'AKIA\\u0049')
    assert escaped != line and json.loads(escaped) == json.loads(line)
    (tmp_path / 'chat.jsonl').write_text(escaped + '\n')
    (t,) = convert(tmp_path / 'chat.jsonl')
    assert value not in t.model_dump_json() and sum(t.metadata['redactions'].values()) == 1


def _cli_text(*args):
    con = Console(record=True, width=200, file=io.StringIO())
    rc = cli.main([str(a) for a in args], con)
    return rc, con.export_text()


def test_cli_validate_and_diff_print_no_secret(tmp_path):
    "`validate` quotes a record's value in an error reason, `diff` prints the params: both redacted"
    sk, tok = SAMPLE_SECRETS['openai_key'], 'ghp_' + 'Zq81LmWx0pTr9kAb' * 2 + 'Cd3E'
    rollout = tmp_path / 'rollout-2025-09-19T09-02-12-val.jsonl'
    rollout.write_text(''.join(json.dumps({'timestamp': '2025-09-19T09:02:12.457Z', 'type': k, 'payload': p}) + '\n'
                               for k, p in [('session_meta', {'id': 's3'}),
                                            ('event_msg', {'type': 'user_message', 'message': 'hi'}),
                                            ('event_msg', {'type': 'token_count',
                                                           'info': {'total_token_usage': {'input_tokens': sk}}})]))
    for fmt in ([], ['--json']):
        rc, text = _cli_text('validate', rollout, *fmt)
        assert rc == 1 and 'invalid literal for int()' in text and '[REDACTED:openai_key]' in text and sk not in text
    runs = [tmp_path / 'run_a.jsonl', tmp_path / 'run_b.jsonl']
    for f, cmd in zip(runs, (f'export GITHUB_TOKEN={tok}; git push', 'git push')):
        call = {'id': 'c1', 'type': 'function', 'function': {'name': 'shell', 'arguments': json.dumps({'cmd': cmd})}}
        f.write_text(json.dumps({'messages': [{'role': 'user', 'content': f'push it, the token is {tok}'},
                                              {'role': 'assistant', 'content': None, 'tool_calls': [call]}]}) + '\n')
    rc, text = _cli_text('diff', *runs)
    assert rc == 1 and 'first divergence' in text and '[REDACTED:github_token]' in text and tok[:12] not in text


def _cc(uuid, parent, side, role, content):
    return {'parentUuid': parent, 'isSidechain': side, 'userType': 'external', 'cwd': '/p', 'sessionId': 's1',
            'version': '1.0.98', 'type': role, 'uuid': uuid, 'timestamp': '2025-09-03T00:47:19.293Z',
            'message': {'role': role, 'content': content, **({'id': f'm-{uuid}'} if role == 'assistant' else {})}}


def test_value_redacted_once_is_redacted_in_the_files_later_trajectories(tmp_path):
    "a Claude Code sidechain, and a second conversation of a JSONL file, lose a value redacted in an earlier one"
    key = 'Zq81LmWx0pTr9k'
    write = {'type': 'tool_use', 'id': 't1', 'name': 'Write', 'input': {'file_path': 'cfg.json', 'api_key': key}}
    cc = [_cc('u1', None, False, 'user', 'set up the client'), _cc('u2', 'u1', False, 'assistant', [write]),
          _cc('u3', 'u2', False, 'user', [{'type': 'tool_result', 'tool_use_id': 't1', 'content': 'written'}]),
          _cc('x1', None, True, 'user', f'Check that the service accepts the key {key}'),
          _cc('x2', 'x1', True, 'assistant', [{'type': 'text', 'text': f'Testing key {key} now'}])]
    (tmp_path / 'cc').mkdir()
    (tmp_path / 'cc' / '7f3c2a10-0000-4000-8000-00000000000a.jsonl').write_text(
        ''.join(json.dumps(r) + '\n' for r in cc))
    chat = [[{'role': 'user', 'content': f'export API_KEY={key}'}, {'role': 'assistant', 'content': 'done'}],
            [{'role': 'user', 'content': f'is {key} still valid?'}, {'role': 'assistant', 'content': 'yes'}]]
    (tmp_path / 'chat.jsonl').write_text(''.join(json.dumps({'messages': m}) + '\n' for m in chat))
    for log, n in (('cc', 2), ('chat.jsonl', 2)):
        ts = list(convert(tmp_path / log))
        assert len(ts) == n and all(key not in t.model_dump_json() for t in ts), log
        assert all(sum(t.metadata['redactions'].values()) >= 1 for t in ts), [t.metadata for t in ts]


def test_cassette_keeps_no_header_it_does_not_know(tmp_path):
    "Generic credential headers (no token shape the secret rules know) reach neither a step nor the side file"
    import copy

    import yaml

    from knowlyr_lab.recorder.report import ConversionReport
    doc = yaml.safe_load((Path(__file__).parent / 'fixtures' / 'agent_logs' / 'openai-chat' / 'test_openai_tool_output.yaml').read_text())
    secrets = {'x-auth-token': 'q8Zr2LkP0vN4sT7wY1bC3dF5gH6jK9mX', 'ocp-apim-subscription-key': '4f9d2c7be1a84d3f9c0e6b5a7d8e1f23',
               'x-amz-security-token': 'FwoGZXIvYXdzEJr//////////wEaDHz7Q9kP2mZxY3vLmSK'}
    for it in doc['interactions']:
        it['request']['headers'].update({h: [v] for h, v in secrets.items()})
        it['response']['headers'] = [{'name': h, 'value': v} for h, v in secrets.items()]   # headers as name/value pairs
    other = copy.deepcopy(doc['interactions'][0])                  # a call that is no chat call: kept as unmapped
    other['request']['uri'], other['request']['parsed_body'] = 'https://api.openai.com/v1/models', None
    doc['interactions'].append(other)
    p, side = tmp_path / 'c.yaml', tmp_path / 'side.jsonl'
    p.write_text(yaml.safe_dump(doc))
    ts = list(convert(p, format='openai-chat', report=ConversionReport(), side_file=side))
    out = ''.join(t.model_dump_json() for t in ts) + (side.read_text() if side.exists() else '')
    assert '"http"' in out and 'v1/models' in out and 'api.openai.com' in out        # the exchange is kept ...
    assert not [h for h, v in secrets.items() if v in out]    # ... without the headers that may carry a credential


def test_a_secret_the_records_gave_away_leaves_no_warning_quarantine_or_report(tmp_path):
    "A key glued into an id (`tX-sk-ant-...`: the key pattern does not match it there) went from the trajectory, as a value its record gave away, but stayed whole in the 'only partly mapped' warning, a quarantined line and the report"
    from knowlyr_lab.recorder.convert import validate
    from knowlyr_lab.recorder.report import ConversionReport
    key = secret_value('anthropic_key')
    fix = Path(__file__).parent / 'fixtures' / 'recorder' / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl'
    user = json.loads(fix.read_text().splitlines()[1])
    user['message'] = {'role': 'user', 'content': [{'type': 'text', 'text': f'my key is {key}'},
                                                   {'type': 'tool_result', 'tool_use_id': f'tX-{key}', 'content': 'done'}]}
    p, q = tmp_path / 's.jsonl', tmp_path / 'quarantine.jsonl'
    p.write_text(json.dumps(user) + '\n' + json.dumps([f'tX-{key}']) + '\n')      # line 2: no object, quarantined
    with ConversionReport(quarantine=q) as rep: t, = convert(p, format='claude-code', report=rep)
    assert key not in t.model_dump_json() and '[REDACTED:anthropic_key]' in t.model_dump_json()
    said = {'warnings': rep.warning_lines(), 'errors': rep.errors, 'issues': rep.issues, 'orphans': rep.orphans,
            'quarantine': q.read_text(), 'validate': [str(f) for f in validate(p, format='claude-code')]}
    assert 'only partly mapped' in said['warnings'][0] and 'tX-[REDACTED:anthropic_key]' in said['warnings'][0]
    assert len(said['errors']) == 1 and q.read_text().count('tX-[REDACTED:anthropic_key]') == 1
    assert not [k for k, v in said.items() if key in json.dumps(v) or key[12:] in json.dumps(v)], said


def test_a_warning_said_before_the_record_that_gives_the_secret_away_is_redacted_of_it_too(tmp_path):
    "The id's warning is made at line 1, the key given away at line 2: the trajectory, redacted once read whole, lost it; the warning kept it"
    from knowlyr_lab.recorder.report import ConversionReport
    key = secret_value('anthropic_key')
    fix = Path(__file__).parent / 'fixtures' / 'recorder' / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl'
    user, reply = map(json.loads, fix.read_text().splitlines()[1:3])
    user['message'] = {'role': 'user', 'content': [{'type': 'text', 'text': 'hi'},
                                                   {'type': 'tool_result', 'tool_use_id': f'tX-{key}', 'content': 'done'}]}
    reply['message']['content'] = [{'type': 'text', 'text': f'your key is {key}'}]
    p = tmp_path / 's.jsonl'
    p.write_text(json.dumps(user) + '\n' + json.dumps(reply) + '\n')
    rep = ConversionReport(); t, = convert(p, format='claude-code', report=rep)
    assert key not in t.model_dump_json()
    w, = rep.warning_lines()
    assert w.startswith(f'{p}:1: ') and 'tX-[REDACTED:anthropic_key]' in w and key[12:] not in w, w
    # counted where the trajectory holds it, not again in the warning that quoted it
    assert rep.redactions == t.metadata['redactions'] == {'anthropic_key': t.model_dump_json().count('[REDACTED:')}


def _glued_then_given(tmp_path, key):
    "A Claude Code session and a chat JSONL file: line 1 malformed and quoting `tX-<key>`, line 2 giving the key away"
    fix = Path(__file__).parent / 'fixtures' / 'recorder' / 'claude-code' / '7f3c2a10-0000-4000-8000-000000000001.jsonl'
    user = json.loads(fix.read_text().splitlines()[1])
    glued = {**user, 'message': {'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': f'tX-{key}',
                                                              'content': 'done'}]}}
    user['message'] = {'role': 'user', 'content': [{'type': 'text', 'text': f'my key is {key}'}]}
    chat = {'messages': [{'role': 'user', 'content': f'my key is {key}'}, {'role': 'assistant', 'content': 'ok'}]}
    logs = {'claude-code': (json.dumps(glued)[:-1], json.dumps(user)),           # line 1 lost its closing brace
            'openai-chat': (json.dumps({'messages': [{'role': 'user', 'content': f'tX-{key}'}]})[:-1], json.dumps(chat))}
    (tmp_path / 'logs').mkdir()
    for fmt, lines in logs.items(): (tmp_path / 'logs' / f'{fmt}.jsonl').write_text('\n'.join(lines) + '\n')
    return {fmt: lines[0] for fmt, lines in logs.items()}


def test_a_quarantine_line_written_before_the_record_that_gives_its_secret_away_is_redacted_of_it(tmp_path):
    "Line 1 malformed, quoting a key glued into an id (no pattern matches it there), line 2 giving the key away: the quarantine line was written whole at line 1"
    from knowlyr_lab.recorder.report import ConversionReport
    key = secret_value('anthropic_key')
    bad = _glued_then_given(tmp_path, key)
    for fmt, line in bad.items():
        q = tmp_path / f'{fmt}.quarantine.jsonl'
        with ConversionReport(quarantine=q) as rep: t, = convert(tmp_path / 'logs' / f'{fmt}.jsonl', format=fmt, report=rep)
        assert key not in t.model_dump_json() and rep.totals['quarantined'] == 1, fmt
        e, = map(json.loads, q.read_text().splitlines())            # still quarantined, whole but for the key
        assert (e['line'], e['raw']) == (1, line.replace(key, '[REDACTED:anthropic_key]')), (fmt, e)
        assert key[13:] not in q.read_text() and key[13:] not in json.dumps(rep.errors + rep.issues), fmt


def test_a_side_file_line_written_before_the_record_that_gives_its_secret_away_is_redacted_of_it(tmp_path):
    "A NeMo Gym rollout without its ng_trajectory (an orphan, to the side file at once) quotes the glued key; the next rollout gives the key away"
    from knowlyr_lab.recorder.report import ConversionReport
    key = secret_value('anthropic_key')
    row = json.loads((Path(__file__).parent / 'fixtures' / 'atif' / 'ng_trajectory_rollouts.jsonl').read_text().splitlines()[0])
    row['ng_trajectory']['invocations'][0]['conversation'][1]['content'] = f'my key is {key}'
    orphan = {'_ng_task_index': 1, 'run_id': f'tX-{key}', 'error': 'capture off'}
    p, side = tmp_path / 'rollouts.jsonl', tmp_path / 'side.jsonl'
    p.write_text(json.dumps(orphan) + '\n' + json.dumps(row) + '\n')
    with ConversionReport(side_file=side) as rep: t, = convert(p, format='ng-trajectory', report=rep)
    assert key not in t.model_dump_json() and '[REDACTED:anthropic_key]' in t.model_dump_json()
    e, = map(json.loads, side.read_text().splitlines())            # the orphan is kept, whole but for the key
    assert (e['line'], e['record']) == (1, {**orphan, 'run_id': 'tX-[REDACTED:anthropic_key]'}), e


def test_cli_convert_quarantines_a_line_before_its_secret_is_given_away_redacted(tmp_path):
    "The same two logs through `knowlyr-recorder convert --quarantine --unmapped`: the output, quarantine and printed errors hold no key"
    key = secret_value('anthropic_key')
    bad = _glued_then_given(tmp_path, key)
    out, q, side = tmp_path / 'out.jsonl', tmp_path / 'q.jsonl', tmp_path / 'side.jsonl'
    rc, text = _cli_text('convert', tmp_path / 'logs', '-o', out, '--quarantine', q, '--unmapped', side, '--no-progress')
    assert rc == 3 and len(out.read_text().splitlines()) == 2, text      # 3: done, with records quarantined
    assert sorted(json.loads(line)['raw'] for line in q.read_text().splitlines()) == sorted(
        b.replace(key, '[REDACTED:anthropic_key]') for b in bad.values())       # both quarantined, nothing else lost
    assert not [f for f in (text, out.read_text(), q.read_text()) if key[13:] in f]
