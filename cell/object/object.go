// Package object is what every workspace object of the cell has, whatever its domain: an ID
// and stamps (who made it, when, when it last changed). Domain packages embed these in their
// types; it imports nothing of the cell.
package object

import "time"

// Object is what every stored object starts with: its ID, which is also the cursor of its
// lists. A type embeds it, and so tells its table its ID.
type Object struct{ ID string }

// ObjectID is the object's ID.
func (o Object) ObjectID() string { return o.ID }

// Stamps say who created an object, when, and when it last changed. Objects and the views of
// the API carry them alike.
type Stamps struct {
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}
