package parser

// Writers of the route and leaf node protocol, in nats-server v2.15.2's exact format
// (route.go addRouteSubOrUnsubProtoToBuf, client.go msgHeaderForRouteOrLeaf, leafnode.go
// writeLeafSub). Each appends one control line, CRLF included, to b and returns the extended
// slice; none allocates when b has room. An empty account (nil) leaves the account out, as on
// a route dedicated to one account (Parser.NoAccount on the other end).
//
// Names (accounts, subjects, queues, replies, origins) are written as given: they must be
// non-empty (but for the account) and free of blanks, as everywhere in the protocol.

// NextQueue returns the first queue group name in q (Op.Queues, or what is left of it) and
// the rest after it; name is nil when there is none left. It walks a message's queue groups
// without allocating:
//
//	for q, rest := NextQueue(op.Queues); q != nil; q, rest = NextQueue(rest) { … }
func NextQueue(q []byte) (name, rest []byte) {
	i := 0
	for i < len(q) && sepTab[q[i]]&sepCRLF != 0 {
		i++
	}
	if i == len(q) {
		return nil, nil
	}
	j := i + 1
	for j < len(q) && sepTab[q[j]]&sepCRLF == 0 {
		j++
	}
	return q[i:j:j], q[j:]
}

// AppendRSub appends a route's interest: "RS+ [<account> ]<subject>\r\n", or for a queue
// subscription "RS+ [<account> ]<subject> <queue> <weight>\r\n". A weight below 1 is
// written as 1 (nats-server reads it so, and never sends less).
func AppendRSub(b, account, subject, queue []byte, weight int32) []byte {
	b = append(b, "RS+ "...)
	b = appendAccount(b, account)
	return appendSubEnd(b, subject, queue, weight)
}

// AppendRUnsub appends "RS- [<account> ]<subject>[ <queue>]\r\n".
func AppendRUnsub(b, account, subject, queue []byte) []byte {
	b = append(b, "RS- "...)
	b = appendAccount(b, account)
	return appendUnsubEnd(b, subject, queue)
}

// AppendRMsgLine appends a routed message's control line; the body (hdrLen bytes of headers
// then the payload, size bytes in all) and its CRLF follow it. Without headers (hdrLen <= 0)
// it is "RMSG [<account> ]<subject> <middle><size>\r\n", with them "HMSG [<account> ]
// <subject> <middle><hdrLen> <size>\r\n", where middle is empty, "<reply> " (a reply and no
// queue groups), "+ <reply> <q1> … <qN> " (a reply and the queue groups this peer is to pick
// a member of) or "| <q1> … <qN> " (queue groups, no reply). queues is a slice the caller
// reuses; its names are written, not kept.
func AppendRMsgLine(b, account, subject, reply []byte, queues [][]byte, hdrLen, size int) []byte {
	if hdrLen > 0 {
		b = append(b, "HMSG "...)
	} else {
		b = append(b, "RMSG "...)
	}
	b = appendAccount(b, account)
	return appendMsgEnd(b, subject, reply, queues, hdrLen, size, false)
}

// AppendLSub appends a leaf node's interest: "LS+ <subject>\r\n" or
// "LS+ <subject> <queue> <weight>\r\n" (a weight below 1 is written as 1).
func AppendLSub(b, subject, queue []byte, weight int32) []byte {
	b = append(b, "LS+ "...)
	return appendSubEnd(b, subject, queue, weight)
}

// AppendLUnsub appends "LS- <subject>[ <queue>]\r\n".
func AppendLUnsub(b, subject, queue []byte) []byte {
	b = append(b, "LS- "...)
	return appendUnsubEnd(b, subject, queue)
}

// AppendLMsgLine appends a message's control line for a leaf node: "LMSG <subject>
// <middle><size>\r\n", or with headers (hdrLen > 0) "HMSG <subject> <middle><hdrLen>
// <size>\r\n"; middle is as for AppendRMsgLine.
func AppendLMsgLine(b, subject, reply []byte, queues [][]byte, hdrLen, size int) []byte {
	if hdrLen > 0 {
		b = append(b, "HMSG "...)
	} else {
		b = append(b, "LMSG "...)
	}
	return appendMsgEnd(b, subject, reply, queues, hdrLen, size, false)
}

// AppendRouteLSub appends leaf interest sent over a route (to a peer that announced "lnoc"
// or "ln"): "LS+ <origin> [<account> ]<subject>[ <queue> <weight>]\r\n"; origin is the
// leaf's cluster, or "_" for none (a peer that announced "ln").
func AppendRouteLSub(b, origin, account, subject, queue []byte, weight int32) []byte {
	b = append(b, "LS+ "...)
	b = append(b, origin...)
	b = append(b, ' ')
	b = appendAccount(b, account)
	return appendSubEnd(b, subject, queue, weight)
}

// AppendRouteLUnsub appends "LS- [<origin> ][<account> ]<subject>[ <queue>]\r\n" for a route;
// a nil origin leaves it out, for a peer that announced neither "lnocu" nor "ln".
func AppendRouteLUnsub(b, origin, account, subject, queue []byte) []byte {
	b = append(b, "LS- "...)
	if len(origin) > 0 {
		b = append(b, origin...)
		b = append(b, ' ')
	}
	b = appendAccount(b, account)
	return appendUnsubEnd(b, subject, queue)
}

// AppendRouteLMsgLine appends the control line of a message from a leaf node forwarded over
// a route (to a peer that announced "lnoc"): "LMSG <origin> [<account> ]<subject>
// <middle><hdrLen> <size>\r\n", the header size always there (0 without headers); middle is
// as for AppendRMsgLine.
func AppendRouteLMsgLine(b, origin, account, subject, reply []byte, queues [][]byte, hdrLen, size int) []byte {
	b = append(b, "LMSG "...)
	b = append(b, origin...)
	b = append(b, ' ')
	b = appendAccount(b, account)
	return appendMsgEnd(b, subject, reply, queues, hdrLen, size, true)
}

func appendAccount(b, account []byte) []byte {
	if len(account) > 0 {
		b = append(b, account...)
		b = append(b, ' ')
	}
	return b
}

func appendSubEnd(b, subject, queue []byte, weight int32) []byte {
	b = append(b, subject...)
	if len(queue) > 0 {
		b = append(b, ' ')
		b = append(b, queue...)
		b = append(b, ' ')
		b = AppendSize(b, int(max(weight, 1)), 0)
	}
	return append(b, '\r', '\n')
}

func appendUnsubEnd(b, subject, queue []byte) []byte {
	b = append(b, subject...)
	if len(queue) > 0 {
		b = append(b, ' ')
		b = append(b, queue...)
	}
	return append(b, '\r', '\n')
}

func appendMsgEnd(b, subject, reply []byte, queues [][]byte, hdrLen, size int, alwaysHdr bool) []byte {
	b = append(b, subject...)
	b = append(b, ' ')
	if len(queues) > 0 {
		if len(reply) > 0 {
			b = append(b, '+', ' ')
			b = append(b, reply...)
			b = append(b, ' ')
		} else {
			b = append(b, '|', ' ')
		}
		for _, q := range queues {
			b = append(b, q...)
			b = append(b, ' ')
		}
	} else if len(reply) > 0 {
		b = append(b, reply...)
		b = append(b, ' ')
	}
	if hdrLen > 0 || alwaysHdr {
		b = AppendSize(b, max(hdrLen, 0), 0)
		b = append(b, ' ')
	}
	b = AppendSize(b, size, 0)
	return append(b, '\r', '\n')
}
