package wire

import "github.com/botharness/outbox/adapters/handlers/admin"

// wireTokens installs the operators' token routes (list, revoke).
func wireTokens(a *App) {
	for k, f := range (&admin.Tokens{Registry: a.Tokens, Clock: a.Config.Clock, Log: a.Log}).Routes() {
		a.AdminExtra[k] = f
	}
}
