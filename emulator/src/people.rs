//! People: the accounts of the emulator that are not service accounts. A spreadsheet shared
//! with a team is edited by people (its owner among them) as well as by sheetq's service
//! account; they sign in to Google with their own e-mail, so the emulator hands them a
//! bearer token for an e-mail address (`POST /_emulator/people/token`,
//! `Emulator::person_token`) instead of the service-account JWT flow. A person's token
//! counts against that person's own per-user quota and is who the protected ranges judge.
//!
//! This file holds what makes an address acceptable as a person: the checks are the ones a
//! person would trip over by mistake (a typo, a pasted name, a service account's address),
//! not the whole of RFC 5322.

/// The domain every service account's address ends with
/// (`NAME@PROJECT.iam.gserviceaccount.com`).
const SERVICE_ACCOUNT_DOMAIN: &str = ".gserviceaccount.com";

/// Whether `email` is a service account's address rather than a person's.
pub fn is_service_account(email: &str) -> bool {
    email.to_ascii_lowercase().ends_with(SERVICE_ACCOUNT_DOMAIN)
}

/// A person's e-mail address as the emulator keeps it (trimmed, lower case: Google compares
/// addresses without regard to case), or why it is not one, naming the fix.
pub fn person_email(email: &str) -> Result<String, String> {
    let email = email.trim();
    let shape = "an e-mail address such as alice@example.com";
    if email.is_empty() {
        return Err(format!("the e-mail address is empty: give {shape}"));
    }
    if email.len() > 254 {
        return Err(format!(
            "the e-mail address is {} characters long; an address has at most 254",
            email.len()
        ));
    }
    if email.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{email:?} holds a space or a control character: give {shape}"
        ));
    }
    let Some((local, domain)) = email.split_once('@') else {
        return Err(format!("{email:?} has no '@': give {shape}"));
    };
    if local.is_empty() || domain.contains('@') {
        return Err(format!(
            "{email:?} is not one address (one name, one '@', one domain): give {shape}"
        ));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if labels.len() < 2 || labels.iter().any(|l| l.is_empty()) {
        return Err(format!(
            "{email:?} has no domain with a dot after the '@': give {shape}"
        ));
    }
    if is_service_account(email) {
        return Err(format!(
            "{email} is a service account, not a person: a service account signs in with its \
             credentials (/_emulator/credentials?account=NAME), not with a person's token"
        ));
    }
    Ok(email.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_a_person_when_it_has_one_name_one_at_and_a_dotted_domain() {
        assert_eq!(
            person_email(" Alice@Example.com ").as_deref(),
            Ok("alice@example.com"),
            "trimmed and compared without case"
        );
        for bad in [
            "",
            "alice",
            "@example.com",
            "alice@",
            "alice@example",
            "alice@example..com",
            "a@b@example.com",
            "alice smith@example.com",
            "alice@exa\nmple.com",
        ] {
            let err = person_email(bad).err();
            assert!(
                err.as_deref()
                    .is_some_and(|e| e.contains("such as alice@example.com")),
                "{bad:?} must be refused, showing the shape of an address: {err:?}"
            );
        }
    }

    #[test]
    fn a_service_account_is_not_a_person() {
        let sa = "sheetq-emulator@sheetq-emulator.iam.gserviceaccount.com";
        assert!(is_service_account(sa));
        assert!(!is_service_account("owner@example.com"));
        let err = person_email(sa).err().unwrap_or_default();
        assert!(
            err.contains("is a service account") && err.contains("credentials"),
            "the refusal says what to use instead: {err}"
        );
    }
}
