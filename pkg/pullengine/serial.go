package pullengine

// serialPuller runs one pull at a time, in the order the engine hands them
// out.
type serialPuller struct{}

var _ Puller = &serialPuller{}

// NewSerialPuller returns a Puller that runs one pull at a time.
func NewSerialPuller() Puller { return &serialPuller{} }

// Run runs work one piece after the other.
func (*serialPuller) Run(next func() (func(), bool)) {
	for {
		work, ok := next()
		if !ok {
			return
		}
		work()
	}
}
