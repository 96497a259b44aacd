package network

// The server side of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC
// 7677), as Kafka's ScramSaslServer runs it: client-first
// (n,[a=authzid],n=user,r=nonce), server-first (r=nonce+server nonce,
// s=salt, i=iterations), client-final (c=biws,r=nonce,p=proof), and
// server-final (v=server signature). No channel binding; the
// tokenauth extension (delegation tokens) is refused.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// ScramCredential is a user's credential for one SCRAM mechanism.
type ScramCredential struct {
	Salt, StoredKey, ServerKey []byte
	Iterations                 int32
}

// ScramHash is the hash of a SCRAM mechanism (nil if it is not one).
func ScramHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case "SCRAM-SHA-256":
		return sha256.New
	case "SCRAM-SHA-512":
		return sha512.New
	}
	return nil
}

// ScramKeys derives the stored and server keys from a salted password
// (what AlterUserScramCredentials carries, KIP-554).
func ScramKeys(h func() hash.Hash, salted []byte) (storedKey, serverKey []byte) {
	ck := hmacOf(h, salted, []byte("Client Key"))
	sum := h()
	sum.Write(ck)
	return sum.Sum(nil), hmacOf(h, salted, []byte("Server Key"))
}

func hmacOf(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// errScramCredentials is the answer to a wrong user or password, the same
// for both, as Kafka's.
func errScramCredentials(mech string) error {
	return fmt.Errorf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", mech)
}

// scramServer is one SCRAM exchange in progress.
type scramServer struct {
	mech   string
	h      func() hash.Hash
	lookup func(mechanism, user string) (ScramCredential, bool)
	step   int
	user   string
	cred   ScramCredential
	nonce  string
	first  string // client-first-message-bare + "," + server-first-message
	gs2    string
}

// next consumes one client message and returns the server's answer; done
// is true after the last one, with the user authenticated.
func (s *scramServer) next(msg []byte) (out []byte, done bool, err error) {
	switch s.step {
	case 0:
		s.step++
		return s.clientFirst(string(msg))
	case 1:
		s.step++
		return s.clientFinal(string(msg))
	}
	return nil, false, errors.New("unexpected SCRAM message after the exchange ended")
}

func (s *scramServer) clientFirst(m string) ([]byte, bool, error) {
	// gs2-header: "n," or "y," then [a=authzid] ",".
	parts := strings.SplitN(m, ",", 3)
	if len(parts) != 3 || (parts[0] != "n" && parts[0] != "y") {
		return nil, false, errors.New("invalid SCRAM client-first message (channel binding is not supported)")
	}
	s.gs2 = parts[0] + "," + parts[1] + ","
	bare := parts[2]
	var nonce string
	var authzid string
	if a, ok := strings.CutPrefix(parts[1], "a="); ok {
		authzid = scramName(a)
	}
	for _, attr := range strings.Split(bare, ",") {
		k, v, ok := strings.Cut(attr, "=")
		if !ok {
			return nil, false, errors.New("invalid SCRAM client-first message")
		}
		switch k {
		case "n":
			s.user = scramName(v)
		case "r":
			nonce = v
		case "m":
			return nil, false, errors.New("SCRAM mandatory extensions are not supported")
		case "tokenauth":
			if v == "true" {
				return nil, false, errors.New("SCRAM delegation token authentication is not supported")
			}
		}
	}
	if s.user == "" || nonce == "" {
		return nil, false, errors.New("invalid SCRAM client-first message: no user or nonce")
	}
	if authzid != "" && authzid != s.user {
		return nil, false, errors.New("Authentication failed: Client requested an authorization id that is different from username")
	}
	cred, ok := s.lookup(s.mech, s.user)
	if !ok {
		return nil, false, errScramCredentials(s.mech)
	}
	s.cred = cred
	var b [24]byte
	rand.Read(b[:])
	s.nonce = nonce + base64.RawURLEncoding.EncodeToString(b[:])
	sf := fmt.Sprintf("r=%s,s=%s,i=%d", s.nonce, base64.StdEncoding.EncodeToString(cred.Salt), cred.Iterations)
	s.first = bare + "," + sf
	return []byte(sf), false, nil
}

func (s *scramServer) clientFinal(m string) ([]byte, bool, error) {
	i := strings.LastIndex(m, ",p=")
	if i < 0 {
		return nil, false, errors.New("invalid SCRAM client-final message: no proof")
	}
	withoutProof, proofB64 := m[:i], m[i+3:]
	var cb, nonce string
	for _, attr := range strings.Split(withoutProof, ",") {
		k, v, _ := strings.Cut(attr, "=")
		switch k {
		case "c":
			cb = v
		case "r":
			nonce = v
		}
	}
	if cb != base64.StdEncoding.EncodeToString([]byte(s.gs2)) {
		return nil, false, errors.New("invalid SCRAM client-final message: channel binding does not match")
	}
	// Kafka checks that the client's nonce ends with the server's
	// (ScramSaslServer.verifyClientProof), and librdkafka relies on it:
	// it sends its own nonce again in front of the server's.
	if !strings.HasSuffix(nonce, s.nonce) {
		return nil, false, errors.New("Invalid client nonce in the final client message.")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return nil, false, errors.New("invalid SCRAM client-final message: proof is not base64")
	}
	authMsg := []byte(s.first + "," + withoutProof)
	sig := hmacOf(s.h, s.cred.StoredKey, authMsg)
	if len(proof) != len(sig) {
		return nil, false, errScramCredentials(s.mech)
	}
	ck := make([]byte, len(sig))
	for i := range sig {
		ck[i] = proof[i] ^ sig[i]
	}
	sum := s.h()
	sum.Write(ck)
	if subtle.ConstantTimeCompare(sum.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, false, errScramCredentials(s.mech)
	}
	v := hmacOf(s.h, s.cred.ServerKey, authMsg)
	return []byte("v=" + base64.StdEncoding.EncodeToString(v)), true, nil
}

// scramName decodes a saslname (=2C is ',', =3D is '=').
func scramName(s string) string {
	return strings.NewReplacer("=2C", ",", "=3D", "=").Replace(s)
}
