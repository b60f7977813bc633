package telegram

import "testing"

// Every action the adapter performs is declared in its registration, with
// its capabilities, a reason and a documentation link (adding an action to
// Actions without declaring it fails here).
func TestRegistrationDeclaresEveryAction(t *testing.T) {
	for name := range Actions {
		a, ok := Registration.Declaration(name)
		if !ok || a.Why == "" || a.Doc == "" {
			t.Errorf("action %q is performed but not declared in Registration.Actions", name)
		}
	}
	for _, a := range Registration.Actions {
		if !Actions[a.Name] {
			t.Errorf("action %q is declared but not performed", a.Name)
		}
	}
}
