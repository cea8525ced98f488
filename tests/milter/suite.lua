-- miltertest suite for spamnb's milter. tests/it/milter.rs runs it once per action mode,
-- against a `spamnb daemon` whose database is trained on corpus mail:
--   miltertest -s suite.lua -D socket=inet:PORT@127.0.0.1|unix:PATH -D mode=tag|quarantine|reject \
--     -D spam=FILE -D ham=FILE \
--     -D reject_text=TEXT
-- It covers negotiation, header add, forged-header removal, the reject reply, quarantine,
-- and an abort mid-body followed by a clean second message on the same connection.

local function check(ok, what)
	if not ok then
		error("FAILED: " .. what)
	end
	mt.echo("ok: " .. what)
end

-- A stored message file as header fields and a CRLF body (an mbox "From " line dropped).
local function load(path)
	local f = assert(io.open(path, "rb"))
	local data = f:read("*a")
	f:close()
	data = data:gsub("\r\n", "\n")
	if data:sub(1, 5) == "From " then
		data = data:gsub("^[^\n]*\n", "", 1)
	end
	local head, body = data:match("^(.-)\n\n(.*)$")
	if head == nil then
		head, body = data, ""
	end
	local fields = {}
	for line in (head .. "\n"):gmatch("([^\n]*)\n") do
		if line:match("^[ \t]") and #fields > 0 then
			fields[#fields][2] = fields[#fields][2] .. "\n" .. line
		else
			local name, value = line:match("^([^:]+):[ \t]?(.*)$")
			if name ~= nil then
				table.insert(fields, { name, value })
			end
		end
	end
	return fields, (body:gsub("\n", "\r\n"))
end

-- MAIL FROM and the header fields of one message; extra fields go first.
local function start(conn, fields, extra)
	mt.macro(conn, SMFIC_MAIL, "i", "4TESTQID")
	check(mt.mailfrom(conn, "<sender@example.org>") == nil, "mail from accepted")
	for _, f in ipairs(extra or {}) do
		check(mt.header(conn, f[1], f[2]) == nil, "header " .. f[1] .. " sent")
	end
	for _, f in ipairs(fields) do
		if mt.header(conn, f[1], f[2]) ~= nil then
			error("FAILED: header " .. f[1] .. " not taken")
		end
	end
	if not mt.test_option(conn, SMFIP_NOEOH) then
		check(mt.eoh(conn) == nil, "end of headers")
	end
end

local function body(conn, text)
	check(mt.bodystring(conn, text) == nil, "body chunk sent")
	local reply = mt.getreply(conn)
	check(reply == SMFIR_CONTINUE or reply == SMFIR_SKIP, "body chunk answered")
end

-- Whether the milter added header `name` with `value` (with or without the leading space
-- that SMFIP_HDR_LEADSPC makes part of the value).
local function added(conn, name, value)
	return mt.eom_check(conn, MT_HDRADD, name, value) or mt.eom_check(conn, MT_HDRADD, name, " " .. value)
end

local ham_fields, ham_body = load(ham)
local spam_fields, spam_body = load(spam)

-- Negotiation: the MTA offers everything; spamnb asks for what it uses and no more.
local conn = mt.connect(socket, 40, 0.25)
check(conn ~= nil, "connected to spamnb at " .. socket)
check(mt.negotiate(conn, nil, nil, nil) == nil, "negotiated")
check(mt.test_action(conn, SMFIF_ADDHDRS), "asks to add headers")
check(mt.test_action(conn, SMFIF_CHGHDRS), "asks to change headers")
check(mt.test_action(conn, SMFIF_QUARANTINE) == (mode == "quarantine"), "asks to quarantine only in quarantine mode")
check(not mt.test_action(conn, SMFIF_CHGBODY), "never asks to change the body")
check(not mt.test_action(conn, SMFIF_ADDRCPT) and not mt.test_action(conn, SMFIF_DELRCPT), "never asks to change recipients")
-- HELO and RCPT are read for the Received: line the MTA writes for the client.
check(not mt.test_option(conn, SMFIP_NOHELO), "HELO is wanted")
check(not mt.test_option(conn, SMFIP_NORCPT), "RCPT is wanted")
check(not mt.test_option(conn, SMFIP_NOHDRS), "headers are wanted")
check(not mt.test_option(conn, SMFIP_NOBODY), "the body is wanted")

check(mt.conninfo(conn, "client.example", "127.0.0.1") == nil, "connection info")

-- 1. Ham carrying forged X-Spam-* headers: they are deleted, spamnb's own are added.
start(conn, ham_fields, { { "X-Spam-Flag", "YES" }, { "X-Spam-Status", "Yes, score=99.0 forged" } })
body(conn, ham_body)
check(mt.eom(conn) == nil, "end of message (ham)")
check(mt.getreply(conn) == SMFIR_CONTINUE, "ham is passed on")
check(mt.eom_check(conn, MT_HDRDELETE, "X-Spam-Flag"), "forged X-Spam-Flag deleted")
check(mt.eom_check(conn, MT_HDRDELETE, "X-Spam-Status"), "forged X-Spam-Status deleted")
check(added(conn, "X-Spam-Flag", "NO"), "X-Spam-Flag: NO added to ham")
check(mt.eom_check(conn, MT_HDRADD, "X-Spam-Status"), "X-Spam-Status added")
check(mt.eom_check(conn, MT_HDRADD, "X-Spam-Level"), "X-Spam-Level added")
check(not mt.eom_check(conn, MT_QUARANTINE), "ham is not quarantined")

-- 2. A message aborted in the middle of its body, with forged headers: no reply to the
-- abort, and nothing of it may leak into the next message.
start(conn, spam_fields, { { "X-Spam-Flag", "NO" } })
check(mt.bodystring(conn, spam_body:sub(1, math.max(1, math.floor(#spam_body / 2)))) == nil, "half a body sent")
check(mt.abort(conn) == nil, "aborted mid-body")

-- 3. A clean second message on the same connection.
start(conn, ham_fields, {})
body(conn, ham_body)
check(mt.eom(conn) == nil, "end of message (ham after abort)")
check(mt.getreply(conn) == SMFIR_CONTINUE, "ham after abort is passed on")
check(not mt.eom_check(conn, MT_HDRDELETE), "no deletion left over from the aborted message")
check(added(conn, "X-Spam-Flag", "NO"), "ham after abort tagged NO")

-- 4. Spam, by mode.
start(conn, spam_fields, {})
body(conn, spam_body)
check(mt.eom(conn) == nil, "end of message (spam)")
if mode == "reject" then
	check(mt.getreply(conn) == SMFIR_REPLYCODE, "spam gets a reply code")
	check(mt.eom_check(conn, MT_SMTPREPLY, "550", "5.7.1", reject_text), "the reply is 550 5.7.1 " .. reject_text)
	check(not mt.eom_check(conn, MT_HDRADD), "a rejected message is not tagged")
else
	check(mt.getreply(conn) == SMFIR_CONTINUE, "spam is passed on")
	check(added(conn, "X-Spam-Flag", "YES"), "X-Spam-Flag: YES added to spam")
	check(mt.eom_check(conn, MT_QUARANTINE) == (mode == "quarantine"), "quarantined only in quarantine mode")
end

mt.disconnect(conn)
mt.echo("suite passed (" .. mode .. ")")
